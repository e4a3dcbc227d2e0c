"""The GitHub Action (action.yml) and the GitLab CI component (templates/recon-plan.yml)
run for real, their steps' shell as the CI runs it, on a pull (merge) request faked on
this machine: a bare `origin` holding the base branch, a clone with the request's
commit, the CI's variables, and the comments API served by a small local server. No
network but the package registry, from which each installs recon's dependencies as on
a runner (pip's cache makes it quick).

What must hold: the first run posts the plan as a comment, the second updates that same
comment (found by its hidden marker, past a first page of other people's comments, which
stay untouched), and the exit code is the check's result: changes pass, bad specs fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from ruamel.yaml import YAML

from reconciler.prcomment import marker
from tests.e2e.test_quickstart import cloned
from tests.gitrepo import GitRepo
from tests.programs import path_without

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "repo"
OTHERS = 105  # comments by others before recon's first: more than one page of 100
TOKEN = "token-of-the-test"


# -- the comments API, served here ----------------------------------------------------------


@dataclass
class Comments:
    """One pull request's comments, as the API keeps them, and every request it got."""

    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)

    def by_recon(self, project: str = ".") -> list[dict[str, Any]]:
        return [c for c in self.items if c["body"].startswith(marker(project))]


def serve(comments: Comments, listing: str, one: re.Pattern[str], token_header: str) -> Any:
    """A server answering GET and POST on `listing` (paginated as GitHub and GitLab do)
    and an update (PATCH or PUT) on a path `one` matches, whose group is the id."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _answer(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length", 0))
            return dict(json.loads(self.rfile.read(length)))

        def _handle(self) -> None:
            url = urlparse(self.path)
            comments.requests.append((self.command, url.path))
            comments.tokens.add(self.headers.get(token_header, ""))
            if url.path == listing and self.command == "GET":
                query = parse_qs(url.query)
                size, page = int(query["per_page"][0]), int(query["page"][0])
                return self._answer(200, comments.items[(page - 1) * size : page * size])
            if url.path == listing and self.command == "POST":
                made = {"id": 1000 + len(comments.items), "body": self._body()["body"]}
                comments.items.append(made)
                return self._answer(201, made)
            found = one.fullmatch(url.path)
            if found and self.command in ("PATCH", "PUT"):
                (comment,) = [c for c in comments.items if c["id"] == int(found.group(1))]
                comment["body"] = self._body()["body"]
                return self._answer(200, comment)
            return self._answer(404, {"message": "Not Found"})

        do_GET = do_POST = do_PATCH = do_PUT = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def github_api() -> Iterator[tuple[str, Comments]]:
    comments = Comments([{"id": n, "body": f"a review comment {n}"} for n in range(OTHERS)])
    server = serve(
        comments,
        "/repos/lab/cartpole/issues/7/comments",
        re.compile(r"/repos/lab/cartpole/issues/comments/(\d+)"),
        "Authorization",
    )
    yield f"http://127.0.0.1:{server.server_port}", comments
    server.shutdown()


@pytest.fixture
def gitlab_api() -> Iterator[tuple[str, Comments]]:
    comments = Comments([{"id": n, "body": f"a review note {n}"} for n in range(OTHERS)])
    notes = "/api/v4/projects/42/merge_requests/3/notes"
    server = serve(comments, notes, re.compile(notes + r"/(\d+)"), "PRIVATE-TOKEN")
    yield f"http://127.0.0.1:{server.server_port}/api/v4", comments
    server.shutdown()


# -- the pull request ---------------------------------------------------------------------


@dataclass(frozen=True)
class PullRequest:
    workspace: Path  # the clone the CI checked out, at the request's commit
    base: str  # the branch it merges into


def pull_request(tmp_path: Path) -> PullRequest:
    """The example project on `main` of a bare origin; a clone on the request's branch,
    where train asks for two GPUs."""
    author = GitRepo(tmp_path / "author")
    shutil.copytree(EXAMPLE, author.root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".recon", "runs"))  # fmt: skip
    author.commit(message="the example")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(author.root), str(origin)], check=True)
    author.git("remote", "add", "origin", str(origin))
    pipeline = author.root / "specs" / "pipeline.yaml"
    pipeline.write_text(pipeline.read_text().replace("gpus: a100:1", "gpus: a100:2"))
    author.git("checkout", "-q", "-b", "two-gpus")
    author.commit(message="train on two GPUs")
    # What a CI's checkout holds: the request's commit, and no branch of origin's fetched.
    workspace = tmp_path / "workspace"
    subprocess.run(["git", "clone", "-q", "--depth=1", "--branch", "two-gpus",
                    f"file://{author.root}", str(workspace)], check=True)  # fmt: skip
    subprocess.run(["git", "remote", "set-url", "origin", str(origin)], cwd=workspace, check=True)
    return PullRequest(workspace, "main")


def ci_path(tmp_path: Path, python: str) -> str:
    """A runner's PATH: python3, git and the system's tools, and no recon."""
    bin_dir = tmp_path / "runner-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").unlink(missing_ok=True)
    (bin_dir / "python3").symlink_to(python)
    system = path_without(tmp_path / "runner-system-bin", {"recon"}, "/usr/bin:/bin")
    return f"{bin_dir}{os.pathsep}{system}"


@pytest.fixture(scope="module")
def recon_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository at HEAD, as a runner gets the action's repository (or the
    package to install)."""
    return cloned(tmp_path_factory.mktemp("release"))


def base_environment(path: str, home: Path) -> dict[str, str]:
    keep = {"LANG": "C.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "SSL_CERT_FILE", "HOME"):
        if name in os.environ:
            keep[name] = os.environ[name]
    keep.setdefault("HOME", str(home))
    return {**keep, "PATH": path, **GIT_IDENTITY}


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "ci",
    "GIT_AUTHOR_EMAIL": "ci@example.invalid",
    "GIT_COMMITTER_NAME": "ci",
    "GIT_COMMITTER_EMAIL": "ci@example.invalid",
}


# -- GitHub: action.yml as a runner runs a composite action ----------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def evaluated(text: str, contexts: Mapping[str, Mapping[str, str]]) -> str:
    """`${{ context.name }}` replaced: the only expressions action.yml may use, so an
    expression of any other form fails here rather than on a runner."""
    assert "${{" not in _EXPRESSION.sub("", text), f"an expression this test cannot read: {text}"

    def value(match: re.Match[str]) -> str:
        context, _, name = match.group(1).partition(".")
        return evaluated(contexts[context][name], contexts)

    return _EXPRESSION.sub(value, text)


@dataclass(frozen=True)
class Run:
    code: int
    outputs: dict[str, str]
    log: str


def run_action(action_dir: Path, inputs: dict[str, str], github: dict[str, str],
               environment: dict[str, str], runner_temp: Path) -> Run:  # fmt: skip
    """action.yml's steps in order, each through `bash --noprofile --norc -eo pipefail`
    as GitHub runs `shell: bash`, with GITHUB_OUTPUT, GITHUB_PATH, GITHUB_STEP_SUMMARY
    kept between them; the first failing step ends the run with its code."""
    action = YAML(typ="safe").load((action_dir / "action.yml").read_text())
    defaults = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    contexts: dict[str, Any] = {"inputs": {**defaults, **inputs}, "github": github}
    files = {name: runner_temp / name.lower() for name in
             ("GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_ENV")}  # fmt: skip
    for file in files.values():
        file.write_text("")
    steps: dict[str, dict[str, str]] = {}
    log, code = "", 0
    for step in action["runs"]["steps"]:
        assert step["shell"] == "bash", step
        added = [line for line in files["GITHUB_PATH"].read_text().splitlines() if line]
        path = os.pathsep.join([*reversed(added), environment["PATH"]])
        env = {**environment, "PATH": path, "RUNNER_TEMP": str(runner_temp),
               **{name: str(file) for name, file in files.items()},
               **{name: evaluated(str(value), contexts)
                  for name, value in step.get("env", {}).items()}}  # fmt: skip
        script = runner_temp / "step.sh"
        script.write_text(evaluated(step["run"], contexts))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=github["workspace"], env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        log += done.stdout + done.stderr
        outputs = dict(
            line.split("=", 1) for line in files["GITHUB_OUTPUT"].read_text().splitlines()
        )
        files["GITHUB_OUTPUT"].write_text("")
        if "id" in step:
            steps[step["id"]] = outputs
        if done.returncode != 0:
            code = done.returncode
            break
    contexts["steps"] = {f"{name}.outputs.{key}": value for name, outs in steps.items()
                         for key, value in outs.items()}  # fmt: skip
    declared = {
        name: _EXPRESSION.sub(lambda m: contexts["steps"].get(m.group(1).partition(".")[2], ""),
                              spec["value"])
        for name, spec in action["outputs"].items()
    }  # fmt: skip
    return Run(code, declared, log)


def github_context(pull: PullRequest, api: str, action_dir: Path, tmp_path: Path) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 7, "pull_request": {"number": 7}}))
    return {
        "token": TOKEN,
        "base_ref": pull.base,
        "action_path": str(action_dir),
        "workspace": str(pull.workspace),
        "api_url": api,
        "repository": "lab/cartpole",
        "event_path": str(event),
    }


def github_environment(context: dict[str, str], path: str, home: Path) -> dict[str, str]:
    return {
        **base_environment(path, home),
        "GITHUB_API_URL": context["api_url"],
        "GITHUB_REPOSITORY": context["repository"],
        "GITHUB_EVENT_PATH": context["event_path"],
        "GITHUB_WORKSPACE": context["workspace"],
        "GITHUB_BASE_REF": context["base_ref"],
        "GITHUB_ACTION_PATH": context["action_path"],
        "CI": "true",
    }


def test_the_action_comments_the_plan_and_updates_it_in_place(
    tmp_path: Path, recon_release: Path, github_api: tuple[str, Comments]
) -> None:
    api, comments = github_api
    pull = pull_request(tmp_path)
    context = github_context(pull, api, recon_release, tmp_path)
    environment = github_environment(context, ci_path(tmp_path, sys.executable), tmp_path)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()

    first = run_action(recon_release, {}, context, environment, runner_temp)
    assert first.code == 0, first.log  # changes (2) pass the check
    assert first.outputs == {"exit-code": "2", "changes": "true"}
    (posted,) = comments.by_recon()
    assert "train" in posted["body"] and "a100:2" in posted["body"], posted["body"]
    assert comments.requests[-1] == ("POST", "/repos/lab/cartpole/issues/7/comments")
    summary = (runner_temp / "github_step_summary").read_text()
    assert summary.strip() == posted["body"].removeprefix(marker(".")).strip()

    # A second push: the same comment, now saying the plan fails on a bad spec.
    bad = pull.workspace / "specs" / "bad.yaml"
    bad.write_text("kind: Run\nname: bad\ncommand: echo hi\nresources:\n  memory: 32G\n")
    subprocess.run(["git", "add", "-A"], cwd=pull.workspace, check=True)
    subprocess.run(["git", "commit", "-qm", "a bad spec"], cwd=pull.workspace, check=True,
                   env={**os.environ, **GIT_IDENTITY})  # fmt: skip
    second = run_action(recon_release, {}, context, environment, runner_temp)
    assert second.code == 1, second.log
    assert second.outputs == {"exit-code": "1", "changes": "false"}
    (updated,) = comments.by_recon()
    assert updated["id"] == posted["id"]
    assert "**recon plan failed** (exit code 1)" in updated["body"]
    assert "specs/bad.yaml:5: resources.memory" in updated["body"]
    assert comments.requests[-1] == ("PATCH", f"/repos/lab/cartpole/issues/comments/{posted['id']}")
    assert [c["body"] for c in comments.items[:OTHERS]] == [
        f"a review comment {n}" for n in range(OTHERS)
    ]
    assert comments.tokens == {f"Bearer {TOKEN}"}


def test_the_action_fails_on_changes_when_asked(
    tmp_path: Path, recon_release: Path, github_api: tuple[str, Comments]
) -> None:
    api, comments = github_api
    pull = pull_request(tmp_path)
    context = github_context(pull, api, recon_release, tmp_path)
    environment = github_environment(context, ci_path(tmp_path, sys.executable), tmp_path)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    done = run_action(recon_release, {"fail-on-changes": "true"}, context, environment,
                      runner_temp)  # fmt: skip
    assert done.code == 2, done.log
    assert len(comments.by_recon()) == 1


def test_the_action_values_gpu_runs_from_the_durations_file_it_is_given(
    tmp_path: Path, recon_release: Path, github_api: tuple[str, Comments]
) -> None:
    """A fresh clone has no journal: the `durations` input (a file `recon cost --format
    json` wrote, committed beside recon.yaml) gives train its last duration, 30 minutes,
    so the comment expects 2 GPUs for 30 minutes instead of "never run"."""
    api, comments = github_api
    pull = pull_request(tmp_path)
    exported = {"last_durations": {"train": 1800.0}, "project": "cartpole"}
    (pull.workspace / "recon-durations.json").write_text(json.dumps(exported))
    context = github_context(pull, api, recon_release, tmp_path)
    environment = github_environment(context, ci_path(tmp_path, sys.executable), tmp_path)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    done = run_action(recon_release, {"durations": "recon-durations.json"}, context,
                      environment, runner_temp)  # fmt: skip
    assert done.code == 0, done.log
    (posted,) = comments.by_recon()
    assert "durations the journal lacks from recon-durations.json" in posted["body"], posted
    assert "| `train` | 2 |" in posted["body"] and "| 30m | 1.000 |" in posted["body"], posted


# -- GitLab: the component's job, its inputs filled in as GitLab does ----------------------------

_INPUT = re.compile(r"\$\[\[\s*inputs\.(\w+)\s*\]\]")


def _text(value: object) -> str:
    """An input's value as GitLab puts it in the text: a boolean as true or false."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def component_job(inputs: dict[str, str]) -> dict[str, Any]:
    """templates/recon-plan.yml's job, `$[[ inputs.x ]]` filled from `inputs` or the
    spec's defaults (GitLab does it before it reads the job)."""
    spec, jobs = YAML(typ="safe").load_all((ROOT / "templates" / "recon-plan.yml").read_text())
    values = {name: _text(i.get("default", "")) for name, i in spec["spec"]["inputs"].items()}
    values.update(inputs)
    (job,) = jobs.values()

    def filled(value: Any) -> Any:
        if isinstance(value, str):
            return _INPUT.sub(lambda m: values[m.group(1)], value)
        if isinstance(value, list):
            return [filled(v) for v in value]
        if isinstance(value, dict):
            return {k: filled(v) for k, v in value.items()}
        return value

    return dict(filled(job))


@pytest.fixture(scope="module")
def image_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The job image's Python: a fresh venv, into which the job pip-installs recon."""
    folder = tmp_path_factory.mktemp("image") / "python"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return str(folder / "bin" / "python3")


def run_job(
    job: dict[str, Any], variables: dict[str, str], workspace: Path
) -> subprocess.CompletedProcess[str]:
    """The job's script as a GitLab runner runs it: one bash, each line's failure ends it."""
    script = "\n".join(job["script"])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=workspace, env={**variables, **job["variables"]},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def test_the_component_notes_the_plan_and_updates_it_in_place(
    tmp_path: Path, recon_release: Path, image_python: str, gitlab_api: tuple[str, Comments]
) -> None:
    api, comments = gitlab_api
    pull = pull_request(tmp_path)
    path = f"{Path(image_python).parent}{os.pathsep}{ci_path(tmp_path, image_python)}"
    variables = {
        **base_environment(path, tmp_path),
        "CI": "true",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_API_V4_URL": api,
        "CI_PROJECT_ID": "42",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": pull.base,
        "RECON_NOTE_TOKEN": TOKEN,
    }
    job = component_job({"package": str(recon_release)})
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]

    first = run_job(job, variables, pull.workspace)
    assert first.returncode == 0, first.stdout + first.stderr
    (posted,) = comments.by_recon()
    assert "a100:2" in posted["body"], posted["body"]
    plan = posted["body"].removeprefix(marker(".") + "\n")
    assert plan.strip() in first.stdout  # the plan, in the job's log too

    second = run_job(job, variables, pull.workspace)
    assert second.returncode == 0, second.stdout + second.stderr
    (updated,) = comments.by_recon()
    assert updated["id"] == posted["id"]
    assert comments.requests[-1] == (
        "PUT",
        f"/api/v4/projects/42/merge_requests/3/notes/{posted['id']}",
    )
    assert comments.tokens == {TOKEN}

    strict = component_job({"package": str(recon_release), "fail_on_changes": "true"})
    assert run_job(strict, variables, pull.workspace).returncode == 2


def test_the_component_says_which_variable_is_missing(
    tmp_path: Path, recon_release: Path, image_python: str, gitlab_api: tuple[str, Comments]
) -> None:
    api, comments = gitlab_api
    pull = pull_request(tmp_path)
    path = f"{Path(image_python).parent}{os.pathsep}{ci_path(tmp_path, image_python)}"
    variables = {
        **base_environment(path, tmp_path),
        "CI_API_V4_URL": api,
        "CI_PROJECT_ID": "42",
        "CI_MERGE_REQUEST_IID": "3",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": pull.base,
    }
    done = run_job(component_job({"package": str(recon_release)}), variables, pull.workspace)
    assert done.returncode == 1
    assert "RECON_NOTE_TOKEN not set: store a token with the api scope" in done.stderr
    assert comments.by_recon() == []
