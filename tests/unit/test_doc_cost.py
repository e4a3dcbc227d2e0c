"""docs/cost.md: `recon cost` and a PR's expected cost, as recon prints them.

The page's project is made here: its specs committed, and a journal holding the jobs the
page describes, each with the usage settling would have recorded (what sacct said it
held). Then each command the page shows is run and its output compared with the page's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import pytest

from reconciler.desired.loader import load_desired, open_source
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.states import Health
from reconciler.scheduler.usage import JobUsage
from reconciler.state.directory import prepare_state_dir
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path
from tests.cli import recon
from tests.docs import ROOT, matches, shown_by_command
from tests.gitrepo import GitRepo

DOC = ROOT / "docs" / "cost.md"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
HOUR = 3600.0

PROJECT = "project: vision\nscheduler: local\ndefaults:\n  partition: cpu\n  time: 1h\n"
PREPARE = (
    "kind: Run\nname: prepare\ncommand: 'python prepare.py {outputs.data.path}'\n"
    "resources:\n  cpus: 4\noutputs:\n  data: data/\n"
)
TRAIN = (
    "kind: Run\nname: train\ncommand: 'python train.py {outputs.model.path}'\n"
    "resources:\n  partition: gpu\n  cpus: 8\n  gpus: 2\n  time: 4h\n"
    "inputs:\n  data: {from: prepare.data}\noutputs:\n  model: model.pt\n"
)
SEEDS = (
    "kind: Run\nname: seeds\nmatrix:\n  seed: [0, 1]\n"
    "command: 'python train.py --seed {matrix.seed} {outputs.model.path}'\n"
    "resources:\n  partition: gpu\n  cpus: 4\n  gpus: 1\n  time: 2h\n"
    "inputs:\n  data: {from: prepare.data}\noutputs:\n  model: model.pt\n"
)
WARM = (
    "kind: Allocation\nname: warm\nresources:\n  partition: gpu\n  cpus: 4\n  gpus: 1\n"
    "time_limit: 4h\nidle_release: 30m\n"
)
FINETUNE = (
    "kind: Run\nname: finetune\ncommand: 'python finetune.py {outputs.model.path}'\n"
    "resources:\n  partition: gpu\n  cpus: 8\n  gpus: 1\n  time: 3h\n"
    "inputs:\n  base: {from: train.model}\noutputs:\n  model: tuned.pt\n"
)


def held(hours: float, gpus: int, cpus: int, **more: float) -> JobUsage:
    seconds = hours * HOUR
    return JobUsage(
        elapsed_s=seconds,
        gpus=gpus,
        cpus=cpus,
        gpu_s=gpus * seconds,
        cpu_s=cpus * seconds,
        **more,  # type: ignore[arg-type]
    )


def journalled(root: Path) -> None:
    """The jobs the page's first commit ran, as settling recorded them."""
    desired = load_desired(open_source(root, None, False))
    commit = desired.commit
    path = journal_path(desired)
    prepare_state_dir(path.parent)  # as recon makes it: git ignores it, a clone has none
    spec = {name: run.spec_hash for name, run in desired.runs.items()}
    spec["warm"] = desired.allocations["warm"].spec_hash
    jobs = [  # name, job id, how it ended, usage, recon's cancel cause
        ("prepare", "101", Health.SUCCEEDED, held(0.25, 0, 4, wait_s=120), None),
        ("seeds[seed=0]", "102_0", Health.SUCCEEDED, held(1.0, 1, 4, wait_s=600), None),
        ("seeds[seed=1]", "102_1", Health.FAILED, held(0.5, 1, 4, wait_s=600), None),
        ("train", "103", Health.SUCCEEDED, held(1.5, 2, 8, wait_s=1800), None),
        ("seeds[seed=1]", "104", Health.SUCCEEDED, held(1.0, 1, 4, wait_s=300), None),
        (
            "warm", "105", Health.CANCELLED,
            held(1.0, 1, 4, idle_s=1800, idle_gpu_s=1800, idle_cpu_s=7200, time_limit_s=4 * HOUR),
            Cause.IDLE,
        ),
    ]  # fmt: skip
    with Journal(path) as journal:
        for number, (name, job_id, health, usage, cause) in enumerate(jobs):
            now = T0 + timedelta(hours=number)
            kind: Literal["run", "alloc"] = "alloc" if name == "warm" else "run"
            record = journal.record_intent("vision", kind, name, spec[name], commit, {}, now)
            journal.record_submitted(record, job_id, now)
            if cause is not None:
                cancel = journal.record_cancel_intent("vision", name, job_id, "idle", now, cause)
                journal.record_cancel_done(cancel, now)
            journal.record_final(job_id, health, None, None, now, usage=usage)


def embed_journalled(root: Path) -> None:
    """The sizes section's run: 5 successes on 1 GPU and 8 CPUs with 8 GiB and a 4-hour
    limit, each an hour long, peaking at 1 GiB with one CPU busy (as settling records
    sacct's MaxRSS and TotalCPU)."""
    desired = load_desired(open_source(root, None, False))
    usage = held(
        1.0, 1, 8, wait_s=360, time_limit_s=4 * HOUR, node_memory_mb=8192.0,
        peak_memory_mb=1024.0, cpu_time_s=HOUR,
    )  # fmt: skip
    with Journal(journal_path(desired)) as journal:
        for number in range(5):
            now = T0 + timedelta(days=1, hours=number)
            record = journal.record_intent(
                "vision", "run", "embed", "e" * 16, desired.commit, {}, now
            )
            journal.record_submitted(record, f"20{number}", now)
            journal.record_final(f"20{number}", Health.SUCCEEDED, 0, None, now, usage=usage)


@pytest.fixture
def vision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = GitRepo(tmp_path / "vision")
    repo.commit(
        {
            "recon.yaml": PROJECT,
            "specs/prepare.yaml": PREPARE,
            "specs/train.yaml": TRAIN,
            "specs/seeds.yaml": SEEDS,
            "specs/warm.yaml": WARM,
        },
        message="vision",
    )
    journalled(repo.root)
    monkeypatch.chdir(repo.root)
    monkeypatch.setenv("COLUMNS", "80")  # as the other pages
    return repo.root


def test_the_pages_outputs_are_what_recon_prints(
    vision: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = shown_by_command(DOC)
    for (command, _), item in shown.items():
        if command.startswith("git "):
            GitRepo(vision).commit(
                {
                    "specs/train.yaml": TRAIN.replace("gpus: 2", "gpus: 4"),
                    "specs/finetune.yaml": FINETUNE,
                },
                message="train on 4 GPUs, add finetune",
            )
            continue
        if command == "recon cost embed":  # the sizes section's own run
            embed_journalled(vision)
        words, _, into = command.partition(" > ")
        if "--durations" in words:  # the PR's CI: a fresh clone, no journal
            monkeypatch.chdir(ci_clone(vision, tmp_path / "ci"))
        ran = recon(capsys, *words.split()[1:])
        monkeypatch.chdir(vision)
        assert ran.code == 0, f"docs/cost.md:{item.line}: {command}\n{ran.err}"
        if into:
            (vision / into).write_text(ran.out)
            ran = replace(ran, out="")
        assert matches(ran.out + ran.err, item.output), (
            f"docs/cost.md:{item.line}: `{command}` prints\n{ran.out}{ran.err}"
        )


def ci_clone(vision: Path, where: Path) -> Path:
    """A clone of the project as a CI job checks it out (no state directory, no journal),
    with the exported durations beside recon.yaml, as if committed."""
    if not where.exists():
        subprocess.run(["git", "clone", "--quiet", str(vision), str(where)], check=True)
        shutil.copy(vision / "recon-durations.json", where / "recon-durations.json")
    return where


def test_the_pages_examples_of_the_sizes_rule_are_what_it_suggests() -> None:
    """Each row of the page's table: three successes that used what it says (memory in
    MiB, time in minutes, busy CPUs) of what it says they held."""
    from reconciler.engine.plan.sizes import suggest
    from reconciler.state.records import SubmissionRecord, SubmissionStatus

    text = DOC.read_text()
    table = text[text.index("<!-- doc-test: sizes -->") :].split("\n\n")[0]
    rows = [line.strip("|").split("|") for line in table.splitlines()[3:]]
    assert len(rows) == 9
    for resource, used, holds, suggested, says in ([c.strip() for c in row] for row in rows):
        most, had, wanted = (float(cell.split()[0]) for cell in (used, holds, suggested))
        hours = most / 60 if resource == "time" else 1.0
        usage = JobUsage(
            elapsed_s=hours * HOUR,
            cpus=int(had) if resource == "CPUs" else 1,
            time_limit_s=had * 60 if resource == "time" else None,
            node_memory_mb=had if resource == "memory" else None,
            peak_memory_mb=most if resource == "memory" else 1.0,
            cpu_time_s=(most if resource == "CPUs" else 1.0) * hours * HOUR,
        )
        record = SubmissionRecord(
            id=1, project="p", name="r", spec_hash="s", commit=None, job_id="1",
            status=SubmissionStatus.SUBMITTED, final_health=Health.SUCCEEDED,
            usage_json=json.dumps(usage.to_json()), created_at=T0, updated_at=T0,
        )  # fmt: skip
        sized = suggest([record] * 3).runs["r"]
        got = {"memory": sized.memory, "time": sized.time, "CPUs": sized.cpus}[resource]
        scale = 60 if resource == "time" else 1
        assert (got.suggested / scale, got.change.value) == (wanted, says), (resource, used)


def test_the_ci_reads_the_exported_durations_or_says_each_run_never_ran(
    vision: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = json.loads(recon(capsys, "cost", "--format", "json").out)["last_durations"]
    # the newest success that ran its command, of each run (seeds[seed=1]: its second job)
    assert exported == {
        "prepare": 900.0, "seeds[seed=0]": 3600.0, "seeds[seed=1]": 3600.0, "train": 5400.0,
    }  # fmt: skip
    (vision / "recon-durations.json").write_text(json.dumps({"last_durations": exported}))
    GitRepo(vision).commit(
        {"specs/train.yaml": TRAIN.replace("gpus: 2", "gpus: 4"), "specs/finetune.yaml": FINETUNE},
        message="train on 4 GPUs, add finetune",
    )
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patched:
        patched.chdir(ci_clone(vision, tmp_path / "ci"))
        bare = recon(capsys, "plan", "--against", "HEAD~1")
        assert "Never run: finetune and train (2 runs)" in bare.out
        assert "Expected cost" not in bare.out
        patched.setenv("RECON_DURATIONS", "recon-durations.json")  # as the CI action sets it
        data = json.loads(recon(capsys, "plan", "--against", "HEAD~1", "--format", "json").out)
        cost = data["expected_cost"]
        assert cost["gpu_hours"] == 6.0 and cost["unknown_runs"] == ["finetune"]
        assert cost["durations_from"] == "recon-durations.json"
        markdown = recon(capsys, "plan", "--against", "HEAD~1", "--format", "markdown").out
        assert "| `train` | 4 | 8 | 1h 30m | 6.000 |" in markdown


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "recon-durations.json does not exist: write it with `recon cost --format json"),
        ("{", "recon-durations.json is not JSON (line 1, column 2"),
        ('{"runs": {}}', DOC.read_text().split("error: ")[-1].split("\n")[0]),
        ('{"last_durations": {"train": -1}}', "last_durations.train is -1, not a number of"),
    ],
    ids=["missing", "not-json", "no-durations", "bad-value"],
)
def test_a_bad_durations_file_is_one_error_naming_it(
    vision: Path, capsys: pytest.CaptureFixture[str], content: str | None, said: str
) -> None:
    if content is not None:
        (vision / "recon-durations.json").write_text(content)
    ran = recon(capsys, "plan", "--against", "HEAD", "--durations", "recon-durations.json")
    assert ran.code == 1 and "Traceback" not in ran.err
    assert f"error: Invalid value for --durations: {said}" in ran.err or said in ran.err, ran.err


def test_bad_input_names_the_option_and_what_to_write(
    vision: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    since = recon(capsys, "cost", "--since", "lately")
    assert since.code == 1 and "--since" in since.err and "7d" in since.err
    assert "Traceback" not in since.err
    unit = recon(capsys, "cost", "--by", "tpu")
    assert unit.code == 1 and "--by" in unit.err and "gpu or cpu" in unit.err
    unknown = recon(capsys, "cost", "trian")
    assert unknown.code == 1 and "no run, sweep or allocation named trian" in unknown.err
    assert "Traceback" not in unit.err + unknown.err


def test_since_a_period_or_a_commit(vision: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    everything = json.loads(recon(capsys, "cost", "--format", "json").out)
    assert everything["total"]["jobs"] == 6
    # the journal's jobs were submitted on 2026-12-01: none in the last hour
    recent = json.loads(recon(capsys, "cost", "--since", "1h", "--format", "json").out)
    assert recent["total"]["jobs"] == 0
    first = GitRepo(vision).git("rev-parse", "HEAD")
    GitRepo(vision).commit({"specs/finetune.yaml": FINETUNE}, message="later")
    since = json.loads(recon(capsys, "cost", "--since", first, "--format", "json").out)
    assert since["total"]["jobs"] == 6
    later = json.loads(recon(capsys, "cost", "--since", "HEAD", "--format", "json").out)
    assert later["total"]["jobs"] == 0  # no job was submitted for the later commit
    seeds = json.loads(recon(capsys, "cost", "seeds", "--format", "json").out)
    assert seeds["total"]["jobs"] == 3 and set(seeds["runs"]) == {"seeds[seed=0]", "seeds[seed=1]"}
