"""The outputs the docs show outside docs/cli.md's console blocks that need recon to run:
stories on a copy of the example project with `scheduler: local`, as the pages say.

Each test fetches its block by the key tests/unit/test_doc_blocks.py lists it under.
Masked everywhere: commit ids, times and timestamps (tests/docs.py's `normalised`), and
the project folder, which is the doc's (`/home/ana/cartpole`) in place of the test's.
Masked where a test says so: job ids (the doc's story ran other jobs before), process
ids, host and user names, ports, how long a pass took, a batch script's sha256 (it holds
the folder) and the digests of file versions taken from size and modification time.
"""

from __future__ import annotations

import getpass
import json
import os
import pty
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.cli import recon
from tests.docs import (
    DOC_FOLDER,
    ROOT,
    Watched,
    copy_example,
    fences,
    idle_pass,
    in_order,
    matches,
    normalised,
    shown_block,
    shown_by_command,
    wait_output,
    watch_lines,
)
from tests.gitrepo import GitRepo

HET = ROOT / "docs" / "het.md"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "LC_ALL": "C.UTF-8"}
ENV.pop("RECON_SCHEDULER", None)


def run_recon(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=root,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project after `recon apply --auto-approve --wait`: every run current
    (the allocation blocked, as on any local backend)."""
    root = copy_example(tmp_path_factory.mktemp("applied") / "cartpole")
    done = run_recon(root, "apply", "--auto-approve", "--wait")
    assert done.returncode == 0, done.stderr
    return root


def test_the_uncommitted_note(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = shown_block("docs/cli.md: note: uncommitted changes (specs/train.yaml) are not in this")
    (example / "specs" / "train.yaml").write_text("# not committed yet\n")
    planned = recon(capsys, "plan")
    assert planned.code == 0, planned.err
    assert normalised(planned.err) == normalised(shown.body), f"{shown.where}:\n{planned.err}"


def test_a_revision_that_is_not_there(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = shown_block("docs/cli.md: error: revision 'origin/main' not found in .: name a commit,")
    planned = recon(capsys, "plan", ".", "--against", "origin/main", "--format", "markdown")
    assert planned.code == 1
    assert planned.err.strip() == shown.body.strip(), f"{shown.where}:\n{planned.err}"


def test_the_prompt_at_a_terminal(example: Path) -> None:
    """At a terminal recon asks; answering no does nothing and prints `Nothing applied.`"""
    shown = shown_block("docs/cli.md: Apply this plan? [y/N]:")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: recon at a terminal, in the example project
        os.execve(sys.executable, [sys.executable, "-m", "reconciler", "apply"], ENV)
    # The whole prompt, up to the space after the colon, before answering: an answer
    # typed earlier is echoed in the middle of it.
    printed = _read_until(terminal, shown.body.strip() + " ")
    os.write(terminal, b"n\n")
    printed += _read_until(terminal, None)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, printed
    lines = [line.strip() for line in printed.replace("\r", "").split("\n")]
    assert any(line.startswith(shown.body.strip()) for line in lines), printed
    assert "Nothing applied." in lines, printed
    assert not (example / "runs").exists()  # nothing was submitted


def _read_until(terminal: int, text: str | None, timeout: float = 60) -> str:
    """What the terminal shows until ``text`` appears (None: until the program ends)."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the program ended and closed the terminal
            chunk = b""
        if not chunk:
            assert text is None, f"ended before {text!r}:\n{out.decode()}"
            return out.decode()
        out += chunk
        if text is not None and text.encode() in out:
            return out.decode()
    raise AssertionError(f"no {text!r} in {timeout} s:\n{out.decode()}")


@contextmanager
def held_lock(root: Path) -> Iterator[None]:
    """The project's lock held by another process, as an apply from cron holds it."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from reconciler.state.lock import project_lock\n"
            "with project_lock(Path(sys.argv[1]), 10):\n"
            "    print('held', flush=True); sys.stdin.read()",
            str(root / ".recon"),
        ],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it releases the lock and ends


# The holder's process id and host, which are the test's.
HOLDER = re.compile(r"\(pid \d+ on [^,]+, since \d\d:\d\d:\d\d\)")


def held(text: str, root: Path) -> str:
    return HOLDER.sub("(pid N on HOST, since T)", text.replace(str(root), DOC_FOLDER))


def test_the_lock_held_by_another_apply(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = shown_block("docs/cli.md: error: another recon apply (pid 20915 on vm, since 23:54:23)")
    with held_lock(example):
        applied = recon(capsys, "apply", "--auto-approve", "--lock-timeout", "0")
    assert applied.code == 3
    assert held(applied.err.strip(), example) == held(shown.body.strip(), Path("/none"))


def test_the_plan_of_a_het_run(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = shown_by_command(HET)[("recon plan", 0)]
    planned = recon(capsys, "plan")
    assert planned.code == 0, planned.err
    assert matches(planned.out, item.output), f"docs/het.md:{item.line}:\n{planned.out}"


# The host the local backend runs on, and the port the environment server took.
RENDEZVOUS = (
    (re.compile(re.escape(socket.gethostname()) + r"\b"), "HOST"),
    (re.compile(r"\bvm\b"), "HOST"),
    (re.compile(r":\d+\b"), ":PORT"),
)


def test_the_rendezvous_log(applied: Path) -> None:
    shown = shown_block("docs/het.md: environments on: vm, learner on: vm")
    (log,) = (applied / "runs" / "actor-learner" / "logs").glob("slurm-*.out")
    printed, doc = log.read_text(), shown.body
    for pattern, mask in RENDEZVOUS:
        printed, doc = pattern.sub(mask, printed), pattern.sub(mask, doc)
    assert printed == doc, f"{shown.where}: the example's job printed\n{log.read_text()}"


def json_as_shown(data: Any, root: Path) -> str:
    """JSON recon wrote, as the docs show it: indented by 2, the project folder the doc's,
    and masked (besides commits and times): job ids, the user and host, the digest of a
    file version taken from its size and time (`fingerprint`), and the script's sha256,
    which depends on the folder, how long a watch's pass took, and the Python a job found."""
    text = json.dumps(data, indent=2).replace(str(root), DOC_FOLDER)
    text = text.replace(f"#user-{USER}", "#user-USER").replace(
        f'"user": "{USER}"', '"user": "USER"'
    )
    masks = (
        (re.compile(r'"(job_id|identifier)": "\d+"'), r'"\1": "N"'),
        (re.compile(r"\bjob[- ]\d+(: \d+)?"), "job N"),
        (re.compile(rf"\b(?:{re.escape(socket.gethostname())}|vm)\b"), "HOST"),
        (re.compile(r'("kind": "fingerprint",\s+"digest": )"[0-9a-f]+"'), r'\1"DIGEST"'),
        (re.compile(r'"script_sha256": "[0-9a-f]+"'), '"script_sha256": "SHA"'),
        (re.compile(r'"seconds": [0-9.]+'), '"seconds": S'),
        (re.compile(r'"python": "Python [0-9.]+"'), '"python": "Python 3.X"'),
    )
    for pattern, mask in masks:
        text = pattern.sub(mask, text)
    return normalised(text)


USER = getpass.getuser()


def test_the_ro_crate_files_and_an_action(
    applied: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(applied)
    assert recon(capsys, "export", "ro-crate").code == 0
    listing = shown_block("docs/cli.md: ro-crate/ro-crate-metadata.json   the crate's description")
    forms = [line.split()[0] for line in listing.body.splitlines()]
    members = [f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)]
    runs = ["actor-learner", "prepare", "train", "evaluate", "compare", *members]  # all succeeded
    wanted = {form.replace("<run>", run) for form in forms for run in runs}
    written = {str(path.relative_to(applied)) for path in (applied / "ro-crate").rglob("*")}
    assert written - {"ro-crate/manifests"} == wanted, listing.where
    for run in runs:  # "each run's manifest, as recon recorded it"
        folder = run.replace("[", "/").rstrip("]") if "[" in run else run  # seeds/lr=..
        recorded = applied / "runs" / folder / ".recon-run" / "manifest.json"
        copied = applied / "ro-crate" / "manifests" / f"{run}.json"
        assert json.loads(copied.read_text()) == json.loads(recorded.read_text())

    shown = shown_block("docs/cli.md: {")
    crate = json.loads((applied / "ro-crate" / "ro-crate-metadata.json").read_text())
    (action,) = [
        entity
        for entity in crate["@graph"]
        if entity.get("@type") == "CreateAction" and entity["name"].startswith("train:")
    ]
    printed = json_as_shown(action, applied)
    assert printed == json_as_shown(json.loads(shown.body), Path("/none")), (
        f"{shown.where}: the crate holds\n{json.dumps(action, indent=2)}"
    )


def test_the_provenance_manifest(applied: Path) -> None:
    shown = shown_block("docs/specs.md: {")
    written = json.loads((applied / "runs" / "train" / ".recon-run" / "manifest.json").read_text())
    printed = json_as_shown(written, applied)
    assert printed == json_as_shown(json.loads(shown.body), Path("/none")), (
        f"{shown.where}: recon wrote\n{json.dumps(written, indent=2)}"
    )


# What het.md's console blocks show, and the test that runs each command.
HET_COMMANDS = {
    ("recon plan", 0): "test_the_plan_of_a_het_run",
    ("recon apply --auto-approve --wait", 0): "test_coupled_runs",
    ("recon status --format json", 0): "test_coupled_runs",
    ("recon apply --auto-approve", 0): "test_coupled_runs",
    ("recon plan", 1): "test_coupled_runs",
}


def test_every_command_het_md_shows_is_run() -> None:
    assert set(shown_by_command(HET)) == set(HET_COMMANDS)


STATUS_JOB_ID = re.compile(r'"job_id": "\d+"')


def as_shown(text: str, root: Path) -> str:
    """An output of the coupled-runs story with job ids masked (the doc's story ran
    other jobs before)."""
    return STATUS_JOB_ID.sub('"job_id": "N"', wait_output(text, root))


def test_coupled_runs(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """het.md's story: the example's runs current, a commit adds its `simulator` and
    `monitor` (the YAML block above the story), the monitor fails and the simulator is
    torn down; then a commit that changes only the monitor: its new job runs."""
    shown = shown_by_command(HET)
    assert recon(capsys, "apply", "--auto-approve", "--wait").code == 0
    (coupled,) = [f for f in fences(HET) if f.lang == "yaml" and "name: simulator" in f.body]
    GitRepo(example).commit({"specs/coupled.yaml": coupled.body}, message="coupled runs")

    for command, code in (
        ("recon apply --auto-approve --wait", 1),
        ("recon status --format json", 0),
    ):
        item = shown[(command, 0)]
        result = recon(capsys, *command.split()[1:])
        printed = result.out + result.err
        assert result.code == code, printed
        assert matches(as_shown(printed, example), as_shown(item.output, Path("/none"))), (
            f"docs/het.md:{item.line}: `{command}` prints\n{printed}"
        )

    # Only the monitor changes: it now runs long enough to be seen running.
    changed = coupled.body.replace("command: sleep 3;", "command: sleep 120;")
    assert changed != coupled.body
    GitRepo(example).commit({"specs/coupled.yaml": changed}, message="fix the monitor")
    try:
        for key in (("recon apply --auto-approve", 0), ("recon plan", 1)):
            item = shown[key]
            result = recon(capsys, *key[0].split()[1:])
            printed = result.out + result.err
            assert result.code == 0, printed
            assert matches(as_shown(printed, example), as_shown(item.output, Path("/none"))), (
                f"docs/het.md:{item.line}: `{key[0]}` prints\n{printed}"
            )
    finally:  # the runs leave the repo: the prune ends the monitor's job (confirmed, in
        # case the guard of docs/cli.md, "When a prune would empty", holds it)
        (example / "specs" / "coupled.yaml").unlink()
        GitRepo(example).commit(message="no coupled runs")
        pruned = recon(capsys, "apply", "--auto-approve", "--allow-prune-all")
        assert "cancelled job" in pruned.out, pruned


# operations.md's session: a commit with a misspelt field, its fix, and an apply from
# cron holding the lock for a few seconds.
BAD = "kind: Run\nname: bad\ncomand: echo hi\n"


def test_a_watch_session(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = shown_block(
        "docs/operations.md: 2026-11-29T23:55:05.559+00:00 INFO    started commit=5333d91"
    )
    assert recon(capsys, "apply", "--auto-approve", "--wait").code == 0
    with Watched(example, ".", "--interval", "3s") as watch:
        watch.until(lambda line: " pass " in line)
        GitRepo(example).commit({"specs/bad.yaml": BAD}, message="a misspelt field")
        watch.until(lambda line: " spec-error " in line)
        (example / "specs" / "bad.yaml").unlink()
        GitRepo(example).commit(message="fixed")
        watch.until(lambda line: "trigger=refs" in line)
        with held_lock(example):
            watch.until(lambda line: "failures=3" in line)
        watch.until(lambda line: " pass " in line)
        assert watch.stop() == 0, watch.lines

    printed = watch_lines(held("".join(watch.lines), example), example)
    doc = watch_lines(held(shown.body, Path("/none")), Path("/none"))
    problem = in_order(printed, doc, idle_pass)
    assert problem is None, f"{shown.where}: the watch {problem}"


# operations.md's JSON log and notifications: a commit adds a run `oops` that exits 2.
OOPS = "kind: Run\nname: oops\ncommand: exit 2\n"


def test_a_watch_in_json_and_its_notifications(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = shown_block(
        'docs/operations.md: {"time": "2026-11-29T23:56:08.857+00:00", "level": "info", "'
    )
    sent = shown_block(
        'docs/operations.md: {"commit": "516ff603b522e18e1e7a24fb54b4ec26b0927a1e", "coun'
    )
    assert recon(capsys, "apply", "--auto-approve", "--wait").code == 0
    notified = example.parent / "notified.jsonl"
    notify = f"{{ cat; echo; }} >> {notified}"
    with Watched(
        example, ".", "--interval", "5s", "--log-format", "json", "--notify", notify
    ) as watch:
        watch.until(lambda line: '"event": "pass"' in line)
        GitRepo(example).commit({"specs/oops.yaml": OOPS}, message="oops")
        watch.until(lambda line: '"trigger": "refs"' in line)
        watch.until(lambda line: notified.exists() and "run-failed" in notified.read_text())
        assert watch.stop() == 0, watch.lines

    printed = [
        json_as_shown(json.loads(line), example)
        for line in "".join(watch.lines).splitlines()
        if line
    ]
    doc = [json_as_shown(json.loads(line), Path("/none")) for line in log.body.splitlines()]
    problem = in_order(printed, doc, idle_json_pass)
    assert problem is None, f"{log.where}: the watch {problem}"

    payloads = [json.loads(line) for line in notified.read_text().splitlines() if line]
    printed = [json_as_shown(payload, example) for payload in payloads]
    doc = [json_as_shown(json.loads(line), Path("/none")) for line in sent.body.splitlines()]
    assert printed == doc, f"{sent.where}: the notifier was sent\n{notified.read_text()}"


def idle_json_pass(shown: str) -> bool:
    """A timer pass that did nothing, as `json_as_shown` gives it."""
    entry = json.loads(shown.replace('"seconds": S', '"seconds": 0'))
    return (
        entry["event"] == "pass"
        and entry["trigger"] == "timer"
        and not entry["counts"]["submitted"]
    )
