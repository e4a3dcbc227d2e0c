"""`recon serve`'s routes, on a real process over the example project (local backend):
no path outside the project's run and state directories on any route that takes a name,
the token, the Host check, one look per interval however many clients, no journal, no
environment values."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.local.serving import app_served, example_project, recon, serving, settle

# What a file outside the view would show if it leaked.
OUTSIDE = "outside-the-project-3f9c"
# Every way to name something outside: `..`, absolute, encoded once and twice, a
# backslash, a NUL, an overlong UTF-8 dot.
ESCAPES = [
    "..",
    "../..",
    "../../../../../../etc/passwd",
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "%252e%252e%252fetc%252fpasswd",
    "%2Fetc%2Fpasswd",
    "/etc/passwd",
    "//etc/passwd",
    "..%5C..%5Cetc%5Cpasswd",
    "prepare%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "prepare/../../../etc/passwd",
    "%00..%2Fetc%2Fpasswd",
    "%c0%ae%c0%ae%2fetc%2fpasswd",
    "SECRET_LINK",
]
# The routes that take a name, with one name each that must work (so that a refusal is
# the route's doing, not a broken route).
NAMED_ROUTES = {"/static/": "app.js", "/api/runs/": "prepare"}


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example project, applied on the local backend, its jobs ended and recorded,
    and a file outside it that must never be served."""
    where = tmp_path_factory.mktemp("serve")
    root = example_project(where)
    outside = where / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE + "\n")
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    members = [f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)]
    assert settle(root) == dict.fromkeys(
        ["actor-learner", "prepare", "train", "evaluate", "compare", *members], "succeeded"
    )
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0  # records, manifests
    yield root


def test_no_route_that_takes_a_name_reaches_outside(applied: Path) -> None:
    # A symlink under the served static folder's name and one in the run directory.
    (applied / "runs" / "SECRET_LINK").symlink_to(applied.parent / "outside" / "secret.txt")
    with serving(applied, "--interval", "1s") as served:
        for route, good in NAMED_ROUTES.items():
            status, _headers, body = served.get(route + good)
            assert status == 200, (route, body)
            for escape in ESCAPES:
                status, _headers, body = served.get(route + escape)
                assert status in (400, 404), (route, escape, status, body[:200])
                text = body.decode("utf-8", errors="replace")
                assert "root:" not in text and OUTSIDE not in text, (route, escape)
                assert "def create_app" not in text, (route, escape)


def test_the_token_is_needed_on_every_route_and_the_host_must_be_ours(applied: Path) -> None:
    token = "a-long-random-token-for-this-test"
    with serving(applied, env={"RECON_SERVE_TOKEN": token}) as served:
        for path in ("/", "/static/app.js", "/api/state", "/api/runs/prepare", "/api/events",
                     "/api/graph.svg", "/nowhere"):  # fmt: skip
            assert served.get(path)[0] == 401, path
            assert served.get(path, {"Authorization": "Bearer wrong"})[0] == 401, path
            assert served.get(path, {"Cookie": "recon_token=wrong"})[0] == 401, path
        assert served.get("/api/state", {"Authorization": f"Bearer {token}"})[0] == 200
        assert served.get("/api/state", {"Cookie": f"recon_token={token}"})[0] == 200
        assert served.get("/?token=wrong", {"Cookie": f"recon_token={token}"})[0] == 401
        status, headers, _body = served.get(f"/api/state?token={token}")
        assert status == 200
        # The page opened with the token: the cookie set, and the token out of the address.
        status, headers, _body = served.get(f"/?token={token}")
        assert (status, headers["location"]) == (303, "/")
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"recon_token={token};") and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert "default-src 'none'" in headers["content-security-policy"]
        # A page elsewhere whose name was rebound to 127.0.0.1 sends its own Host.
        status, _headers, _body = served.get(
            "/api/state", {"Host": "evil.example", "Authorization": f"Bearer {token}"}
        )
        assert status == 400


def test_another_address_with_a_token_serves_any_host_name_that_carries_it(
    applied: Path,
) -> None:
    token = "another-long-random-token"
    with serving(applied, "--host", "0.0.0.0", env={"RECON_SERVE_TOKEN": token}) as served:
        named = {"Host": "recon.cluster.example"}
        assert served.get("/api/state", named)[0] == 401
        bearer = {**named, "Authorization": f"Bearer {token}"}
        status, _headers, body = served.get("/api/state", bearer)
        assert status == 200 and b'"project":"cartpole"' in body


def test_any_loopback_address_serves_without_a_token_and_answers_the_url_it_prints(
    applied: Path,
) -> None:
    """127.0.0.0/8 is this machine's only: no token needed, and the address it listens
    on is a Host it answers; a name rebound to it is still refused."""
    with serving(applied, host="127.0.0.2") as served:
        status, _headers, body = served.get("/api/state")  # Host: 127.0.0.2:PORT
        assert status == 200 and b'"project":"cartpole"' in body
        assert served.get("/api/state", {"Host": "localhost"})[0] == 200
        assert served.get("/api/state", {"Host": f"evil.example:{served.port}"})[0] == 400
        assert served.get("/api/state", {"Host": "127.0.0.3"})[0] == 400
    assert f"recon serve: http://127.0.0.2:{served.port}/ for cartpole" in served.output
    # The same rule by name.
    with serving(applied, host="localhost") as served:
        assert served.get("/", {"Host": f"localhost:{served.port}"})[0] == 200


def test_another_address_needs_a_token(applied: Path) -> None:
    refused = recon(applied, "serve", ".", "--host", "0.0.0.0", timeout=60)
    assert refused.returncode == 1
    assert "--host 0.0.0.0 lets other machines read the view: set a token" in refused.stderr
    empty = applied.parent / "empty-token"
    empty.write_text("\n")
    refused = recon(applied, "serve", ".", "--token-file", str(empty), timeout=60)
    assert refused.returncode == 1 and "is empty" in refused.stderr


def test_a_port_in_use_is_a_plain_error_and_sigterm_ends_open_streams_at_once(
    applied: Path,
) -> None:
    with serving(applied, "--interval", "1s") as served:
        taken = recon(applied, "serve", ".", "--port", str(served.port), timeout=60)
        assert taken.returncode == 1
        assert f"error: cannot listen on 127.0.0.1:{served.port}: Address already in use" in (
            taken.stderr
        )
        assert "Traceback" not in taken.stdout + taken.stderr
        # An open page's event stream must not hold the shutdown.
        stream = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        stream.request("GET", "/api/events")
        response = stream.getresponse()
        assert response.status == 200
        assert response.readline() == b"event: state\n"
        assert served.process is not None
        started = time.monotonic()
        served.process.terminate()
        output = served.process.communicate(timeout=30)[0]
        assert time.monotonic() - started < 4
        stream.close()
    assert served.process.returncode == 0, output
    assert "Traceback" not in output and "ERROR" not in output, output


def test_many_clients_share_one_look_per_interval_and_no_journal_is_made(
    tmp_path: Path,
) -> None:
    from reconciler.engine.reconcile import Look, Request, look_once
    from reconciler.web.app import create_app
    from reconciler.web.poller import Poller

    root = example_project(tmp_path)
    looks = 0

    def look() -> Look:
        nonlocal looks
        looks += 1
        return look_once(Request(root, scheduler="local"))

    interval = 0.5
    poller = Poller(look, interval, graph_limit=200)
    app = create_app(poller, hosts=["127.0.0.1"])
    answered = 0
    with app_served(app) as served:
        started = time.monotonic()

        def browse() -> None:
            nonlocal answered
            while time.monotonic() - started < 2.0:
                assert served.get("/api/state")[0] == 200
                assert served.get("/api/runs/prepare")[0] in (200, 503)
                answered += 1

        browsers = [threading.Thread(target=browse) for _ in range(8)]
        for thread in browsers:
            thread.start()
        for thread in browsers:
            thread.join()
        elapsed = time.monotonic() - started
    assert answered > 20
    seen = poller.seen()
    assert seen.error is None and seen.snapshot is not None and seen.looks == looks
    assert 2 <= looks <= elapsed / interval + 2, (looks, elapsed)
    assert not (root / ".recon" / "journal.sqlite").exists()


def test_no_environment_value_is_shown_and_the_history_spans_commits(tmp_path: Path) -> None:
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.app import create_app
    from reconciler.web.poller import Poller

    secret = "s3cret-value-7d1e"
    repo = GitRepo(tmp_path / "env")
    repo.commit(
        {
            "recon.yaml": "project: envshow\nscheduler: local\n",
            "specs/runs.yaml": (
                "kind: Run\nname: hello\ncommand: echo hello > {outputs.out.path}\n"
                f"env:\n  API_KEY: {secret}  # a comment kept\n  MODE: fast\n"
                "outputs:\n  out: out.txt\n"
            ),
        }
    )
    root = repo.root
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    assert settle(root) == {"hello": "succeeded"}
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    first = repo.git("rev-parse", "HEAD")
    # A second commit changes the command: the run's history spans both.
    spec = (root / "specs" / "runs.yaml").read_text()
    second = repo.commit({"specs/runs.yaml": spec.replace("echo hello", "echo hello again")})
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    assert settle(root) == {"hello": "succeeded"}
    assert recon(root, "apply", ".", "--auto-approve").returncode == 0
    poller = Poller(lambda: look_once(Request(root)), 60, graph_limit=200)
    with app_served(create_app(poller, hosts=["127.0.0.1"])) as served:
        deadline = time.monotonic() + 30
        while (response := served.get("/api/runs/hello"))[0] == 503:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        state = served.get("/api/state")[2]
    assert response[0] == 200
    details = json.loads(response[2])
    assert re.search(r"API_KEY: \(hidden\) +# a comment kept", details["spec"])
    assert "MODE: (hidden)" in details["spec"]
    assert details["manifest"]["run"] == "hello"
    assert details["manifest"]["commit"] == second
    assert [(h["commit"], h["health"]) for h in details["history"]] == [
        (second, "succeeded"),
        (first, "succeeded"),
    ]
    assert secret.encode() not in response[2] and secret.encode() not in state


def test_symlinks_out_of_a_run_directory_are_not_followed(applied: Path) -> None:
    """Last in this module: it changes the applied project's run directories."""
    outside = applied.parent / "outside"
    runs = applied / "runs"
    # prepare's logs folder, train's manifest folder and evaluate's whole directory
    # are swapped for symlinks to copies outside, with a marker in each.
    for name, part in (("prepare", "logs"), ("train", ".recon-run"), ("evaluate", "")):
        target = outside / f"{name}-{part or 'all'}"
        source = runs / name / part if part else runs / name
        shutil.copytree(source, target)
        for file in target.rglob("*"):
            if file.is_file() and file.suffix in (".out", ".json"):
                file.write_text(file.read_text().replace("wrote", OUTSIDE).replace(
                    '"run":', f'"{OUTSIDE}": 1, "run":'))  # fmt: skip
        shutil.rmtree(source)
        os.symlink(target, source)
    with serving(applied, "--interval", "1s") as served:
        deadline = time.monotonic() + 30
        while served.get("/api/runs/prepare")[0] == 503:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for name in ("prepare", "train", "evaluate"):
            status, _headers, body = served.get(f"/api/runs/{name}")
            assert status == 200, body
            assert OUTSIDE.encode() not in body, name
        details = {
            n: json.loads(served.get(f"/api/runs/{n}")[2]) for n in ("prepare", "train", "evaluate")
        }
        assert details["prepare"]["log"]["job_id"] and details["prepare"]["log"]["stdout"] is None
        assert details["train"]["manifest"] is None
        assert (
            details["evaluate"]["manifest"] is None and details["evaluate"]["log"]["stdout"] is None
        )
        # The control: actor-learner, untouched, still shows its log and manifest.
        control = json.loads(served.get("/api/runs/actor-learner")[2])
        assert control["log"]["stdout"] and control["manifest"]["run"] == "actor-learner"
