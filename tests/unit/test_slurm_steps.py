"""Allocations and their steps in Slurm's words: argv, the observation of steps read from
literal squeue and sacct text (taken from the dev cluster), and start_step against a fake
runner and a fake srun process."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.desired.desired import effective_allocation, spec_hash
from reconciler.desired.models import Allocation, Container, NodeShape, Project, Run, RunResources
from reconciler.desired.resources import Duration
from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import Launch, StepRequest
from reconciler.scheduler.render import allocation_options
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.combine import combine
from reconciler.scheduler.slurm.launches import launch_of, running_launches
from reconciler.scheduler.slurm.parse import parse_sacct, parse_squeue, parse_squeue_steps
from reconciler.scheduler.slurm.runner import _step_environment
from reconciler.scheduler.slurm.steps import (
    container_features,
    container_options,
    srun,
    step_named,
    step_options,
)
from reconciler.scheduler.slurm.testing import ScriptedRunner, ok
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from tests.unit.test_slurm_adapter import NOW

WARM = Tag(
    project="demo",
    deployment="0123456789ab",
    kind="alloc",
    name="warm",
    spec_hash="0123456789abcdef",
)
TRAIN = Tag(
    project="demo",
    deployment="0123456789ab",
    kind="run",
    name="train",
    spec_hash="00112233445566ff",
)

# An allocation running setup (done), a run that failed (exit 3) and one still running.
SQUEUE = (
    "1063|1063|RUNNING|None|cpu1|cpu|2026-11-29T23:42:25|2026-11-29T23:42:25|4:52||demo.warm"
    "|recon2:demo:0123456789ab:alloc:warm:0123456789abcdef\n"
)
SACCT = """\
1063|1063|RUNNING|0:0|None|2026-11-29T23:42:25|2026-11-29T23:42:25|Unknown|cpu1|cpu|||||||demo.warm|
1063.0|1063.0|COMPLETED|0:0||2026-11-29T23:42:25|2026-11-29T23:42:25|2026-11-29T23:42:25|cpu1||||||||recon2:demo:0123456789ab:alloc:warm:0123456789abcdef|
1063.1|1063.1|FAILED|3:0||2026-11-29T23:42:25|2026-11-29T23:42:25|2026-11-29T23:42:25|cpu1||||||||recon2:demo:0123456789ab:run:prep:fedcba9876543210|
1063.2|1063.2|RUNNING|0:0||2026-11-29T23:42:25|2026-11-29T23:42:25|Unknown|cpu1||||||||recon2:demo:0123456789ab:run:train:00112233445566ff|
"""


def test_runs_steps_in_an_allocation_are_jobs_of_those_runs() -> None:
    observation = combine(parse_squeue(SQUEUE, UTC), parse_sacct(SACCT, UTC), NOW)
    assert observation.complete, observation.problems
    alloc, prep, train = observation.jobs
    assert (alloc.job_id, alloc.tag) == ("1063", WARM)
    assert [row.job_id for row in alloc.steps] == ["1063.0", "1063.1", "1063.2"]
    assert [row.job_id for row in alloc.live_steps] == ["1063.2"]
    assert alloc.components[0].time_left == timedelta(minutes=4, seconds=52)
    assert alloc.steps[0].step_tag == WARM  # setup carries the allocation's own tag

    assert (prep.job_id, prep.tag.name, prep.tag.kind) == ("1063.1", "prep", "run")
    assert prep.finished and prep.health is Health.FAILED
    assert prep.components[0].exit_code == 3 and not prep.steps
    assert (train.job_id, train.tag, train.health) == ("1063.2", TRAIN, Health.RUNNING)
    assert not train.finished
    assert observation.find("demo", "train") == (train,)


def test_steps_of_a_batch_job_stay_its_own() -> None:
    squeue = SQUEUE.replace(":alloc:warm:", ":run:warm:")
    observation = combine(parse_squeue(squeue, UTC), parse_sacct(SACCT, UTC), NOW)
    assert [job.job_id for job in observation.jobs] == ["1063"]


# Captured on the dev cluster (Slurm 22.05.8) 0.5 s after a step started in an allocation
# granted 0.1 s before it: slurmctld lists both; sacct's window (the adapter's own query)
# lists neither the allocation nor its step yet (slurmctld records a job in accounting
# only on its next pass, every 5 s), although `sacct -j 21708` already printed
# `21708|allocation|PENDING|...` and `21708.0|recon2:...|RUNNING|...`. Its other lines
# are other jobs of the same user.
FRESH_SQUEUE = (
    "21708|21708|RUNNING|None|cpu1|cpu|2026-12-01T21:00:23|2026-12-01T21:00:23|5:00"
    "|/work/wt/stepseen|sscapbdd212.warm"
    "|recon2:sscapbdd212:0123456789ab:alloc:warm:0123456789abcdef\n"
)
FRESH_STEPS = (
    "21708.0|RUNNING|2026-12-01T21:00:23|cpu1"
    "|recon2:sscapbdd212:0123456789ab:run:sleeper:00112233445566ff\n"
)
FRESH_SACCT = (
    "21707|21707|CANCELLED by 0|0:0|None|2026-12-01T21:00:04|2026-12-01T21:00:04"
    "|2026-12-01T21:00:10|cpu1|cpu||||||/tmp/stepseen-pvn55d6f/repo|ss9bc6ec51fa.warm"
    "|recon2:ss9bc6ec51fa:4dfd1de48986:alloc:warm:3ee743b5bb857759\n"
    "21707.0|21707.0|CANCELLED|0:15||2026-12-01T21:00:07|2026-12-01T21:00:07"
    "|2026-12-01T21:00:11|cpu1||||||||recon2:ss9bc6ec51fa:4dfd1de48986:run:sleeper:cd07677326ea71e8|\n"
)
SLEEPER = Tag(
    project="sscapbdd212",
    deployment="0123456789ab",
    kind="run",
    name="sleeper",
    spec_hash="00112233445566ff",
)


def fresh_scheduler(runner: ScriptedRunner) -> SlurmScheduler:
    return SlurmScheduler(
        runner, clock=lambda: NOW, tz=UTC, user="tester", project="sscapbdd212", launches=tuple
    )


def test_a_step_in_an_allocation_accounting_has_not_recorded_yet_is_seen() -> None:
    runner = ScriptedRunner(squeue=[ok(FRESH_SQUEUE), ok(FRESH_STEPS)], sacct=[ok(FRESH_SACCT)])
    observation = fresh_scheduler(runner).observe(NOW - timedelta(hours=1))
    (sleeper,) = observation.find("sscapbdd212", "sleeper")
    assert (sleeper.job_id, sleeper.tag, sleeper.health) == ("21708.0", SLEEPER, Health.RUNNING)
    (alloc,) = observation.find("sscapbdd212", "warm")
    assert [row.job_id for row in alloc.live_steps] == ["21708.0"]
    assert observation.complete, observation.problems
    # Asked of slurmctld, between squeue and sacct, for the running allocations only.
    assert runner.commands() == ["squeue", "squeue", "sacct", "sacct"]
    assert runner.calls[1][0] == [
        "squeue",
        "--steps",
        "--jobs=21708",
        "--noheader",
        "--Format=StepId:|,StepState:|,StartTime:|,Nodes:|,StepName:",
    ]


def test_squeue_is_asked_for_steps_only_while_an_allocation_of_the_project_runs() -> None:
    pending = FRESH_SQUEUE.replace("|RUNNING|", "|PENDING|")
    others = FRESH_SQUEUE.replace("sscapbdd212", "elsewhere")
    batch = FRESH_SQUEUE.replace(":alloc:warm:", ":run:warm:")
    for live in (pending, others, batch, ""):
        runner = ScriptedRunner(squeue=[ok(live)], sacct=[ok(FRESH_SACCT)])
        fresh_scheduler(runner).observe(NOW - timedelta(hours=1))
        assert runner.commands().count("squeue") == 1, live


def test_sacct_speaks_for_a_step_it_lists_and_squeue_only_for_jobs_it_holds() -> None:
    # The step ended between the two calls: squeue --steps still listed it, sacct not.
    ended = (
        "21708|21708|RUNNING|0:0|None|2026-12-01T21:00:23|2026-12-01T21:00:23|Unknown|cpu1|cpu"
        "|||||||sscapbdd212.warm|\n"
        "21708.0|21708.0|COMPLETED|0:0||2026-12-01T21:00:23|2026-12-01T21:00:23"
        "|2026-12-01T21:00:33|cpu1||||||||recon2:sscapbdd212:0123456789ab:run:sleeper:00112233445566ff|\n"
    )
    squeue, steps = parse_squeue(FRESH_SQUEUE, UTC), parse_squeue_steps(FRESH_STEPS, UTC)
    observation = combine(squeue, parse_sacct(ended, UTC), NOW, live_steps=steps)
    (sleeper,) = observation.find("sscapbdd212", "sleeper")
    assert sleeper.health is Health.SUCCEEDED and sleeper.components[0].exit_code == 0
    # A step of a job squeue no longer lists is left to sacct: no step without its job.
    gone = combine(parse_squeue("", UTC), parse_sacct(FRESH_SACCT, UTC), NOW, live_steps=steps)
    assert gone.complete and "21708.0" not in {job.job_id for job in gone.jobs}


def test_squeue_step_rows_read_the_name_whole_and_refuse_what_is_no_step() -> None:
    parsed = parse_squeue_steps(
        "12.3|RUNNING|2026-12-01T21:00:23|cpu[1-2]|a|name|with|bars\n"
        "12|RUNNING|2026-12-01T21:00:23|cpu1|recon2:demo:0123456789ab:run:x:00112233445566ff\n"
        "12.4|RUNNING|2026-12-01T21:00:23\n",
        UTC,
    )
    (row,) = parsed.records
    assert (row.job_id, row.step, row.name, row.nodes) == (
        "12.3",
        "3",
        "a|name|with|bars",
        "cpu[1-2]",
    )
    assert row.start == datetime(2026, 12, 1, 21, 0, 23, tzinfo=UTC) and row.source == "squeue"
    assert [bad.why for bad in parsed.rejected] == [
        "not a step id '12'",
        "expected 5 '|'-separated fields",
    ]
    # A row of recon's that cannot be read leaves the observation incomplete.
    squeue = parse_squeue(FRESH_SQUEUE, UTC)
    observation = combine(squeue, parse_sacct("", UTC), NOW, live_steps=parsed)
    assert not observation.complete


def test_salloc_options_from_an_allocation_spec() -> None:
    spec = Allocation.model_validate(
        {
            "kind": "Allocation",
            "name": "warm",
            "time_limit": "2h",
            "resources": {"partition": "gpu", "cpus": 4, "memory": "1GiB", "gpus": "A100:2"},
        }
    )
    assert allocation_options(spec) == (
        "--time=02:00:00",
        "--partition=gpu",
        "--cpus-per-task=4",
        "--mem=1024M",
        "--gres=gpu:a100:2",
    )


def test_an_allocation_is_charged_to_its_account_and_qos_or_the_projects_defaults() -> None:
    def held(resources: Mapping[str, object], defaults: Mapping[str, object]) -> tuple[str, ...]:
        spec = Allocation.model_validate(
            {"kind": "Allocation", "name": "warm", "time_limit": "1h", "resources": resources}
        )
        project = Project.model_validate({"project": "demo", "defaults": defaults})
        return allocation_options(effective_allocation(spec, project))

    assert held({"account": "lab-a", "qos": "high"}, {}) == (
        "--time=01:00:00",
        "--account=lab-a",
        "--qos=high",
    )
    # The project's defaults fill what the allocation leaves out, and only that.
    defaults = {"account": "lab-b", "qos": "normal", "time": "2h"}
    assert held({"qos": "high"}, defaults) == (
        "--time=01:00:00",
        "--account=lab-b",
        "--qos=high",
    )
    assert held({}, {}) == ("--time=01:00:00",)


def test_an_allocation_without_account_keeps_the_hash_it_had_before_accounts() -> None:
    # Computed before allocations took account and qos: an allocation held by an older
    # recon stays the current job of its spec, not "allocation spec changed".
    spec = Allocation.model_validate(
        {
            "kind": "Allocation",
            "name": "warm",
            "time_limit": "1h",
            "resources": {"partition": "gpu", "gpus": "a100:2", "memory": "1GiB"},
            "setup": ["true"],
        }
    )
    assert spec_hash(spec) == "4fc4922da25b96ba"
    # Nor does idle_release change it: giving a held allocation one does not replace it.
    assert spec_hash(spec.model_copy(update={"idle_release": Duration(60)})) == "4fc4922da25b96ba"
    charged = spec.model_copy(
        update={"resources": spec.resources.model_copy(update={"account": "lab-a"})}
    )
    assert spec_hash(charged) != "4fc4922da25b96ba"


def test_a_run_step_is_one_task_and_setup_one_per_node() -> None:
    resources = RunResources.model_validate({"cpus": 2, "memory": "100MiB", "time": "5m"})
    assert step_options(resources) == (
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=2",
        "--mem=100M",
    )
    assert step_options(None) == ("--ntasks-per-node=1",)


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({"nodes": 2}, ("--nodes=2", "--ntasks=2")),  # one task per node
        ({"nodes": 2, "ntasks_per_node": 1}, ("--nodes=2", "--ntasks-per-node=1")),
        ({"ntasks": 4}, ("--nodes=1", "--ntasks=4")),
        (
            {"nodes": 2, "ntasks": 3, "ntasks_per_node": 2},
            ("--nodes=2", "--ntasks=3", "--ntasks-per-node=2"),
        ),
    ],
)
def test_a_step_of_several_tasks_or_nodes(
    layout: dict[str, int], expected: tuple[str, ...]
) -> None:
    shape = RunResources.model_validate({**layout, "cpus": 1})
    assert step_options(shape) == (*expected, "--cpus-per-task=1")


def test_a_step_asking_no_gpus_is_given_none_where_the_allocation_holds_them() -> None:
    cpu_only = RunResources.model_validate({"cpus": 1})
    one_gpu = RunResources.model_validate({"cpus": 1, "gpus": 1})
    assert step_options(cpu_only, allocation_gpus=True)[-1] == "--gres=gpu:0"
    assert step_options(one_gpu, allocation_gpus=True)[-1] == "--gres=gpu:1"
    # Where the allocation holds none, no gres at all: a cluster without gpu gres may
    # refuse even gpu:0.
    assert "--gres=gpu:0" not in step_options(cpu_only, allocation_gpus=False)
    assert step_options(None, allocation_gpus=True) == ("--ntasks-per-node=1",)


def test_a_gpu_run_gets_its_gpus_to_itself_and_others_overlap() -> None:
    def sharing_of(shape: NodeShape | None) -> list[str]:
        argv = srun(
            StepRequest(allocation_id="12", script=Path("/s.sh"), workdir=Path("/w"),
                        log_dir=Path("/l"), shape=shape, allocation_gpus=True, tag=TRAIN)
        )  # fmt: skip
        return [arg for arg in argv if arg in ("--overlap", "--exact")]

    # Verified on Slurm 22.05 (docs/specs.md): --overlap shares GRES too, so GPU steps
    # go without it, and with --exact so the next GPU step finds CPUs free.
    assert sharing_of(RunResources.model_validate({"gpus": 1})) == ["--exact"]
    assert sharing_of(RunResources.model_validate({"cpus": 1})) == ["--overlap"]
    assert sharing_of(None) == ["--overlap"]  # setup


def test_a_launch_is_an_srun_of_a_step_recon_named() -> None:
    argv = srun(request(Path("/tmp")))
    assert launch_of(argv) == Launch(allocation_id="12", tag=TRAIN)
    assert launch_of(["/usr/bin/srun", *argv[1:]]) == Launch(allocation_id="12", tag=TRAIN)
    assert launch_of(["srun", "--jobid=12", "--job-name=probe", "bash"]) is None
    assert launch_of(["sbatch", f"--job-name={TRAIN.format()}", "--jobid=12"]) is None
    assert launch_of(["srun", f"--job-name={TRAIN.format()}", "bash"]) is None
    assert launch_of([]) is None


def test_running_launches_reads_this_users_command_lines(tmp_path: Path) -> None:
    def process(pid: str, *argv: str) -> None:
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    process("100", "srun", "--jobid=12", f"--job-name={TRAIN.format()}", "bash", "s.sh")
    process("101", "bash", "-c", "sleep 1")
    (tmp_path / "self").mkdir()
    (tmp_path / "102").mkdir()  # ended while looked at: no cmdline
    assert running_launches(tmp_path) == (Launch(allocation_id="12", tag=TRAIN),)
    assert running_launches(tmp_path / "absent") is None


def test_containers_are_pyxis_flags_named_after_the_allocation() -> None:
    plain = Container(image="nvcr.io/nvidia/pytorch:24.01-py3")
    assert container_options(plain, "warm") == (
        "--container-image=nvcr.io/nvidia/pytorch:24.01-py3",
        "--container-name=warm",
    )
    named = Container(image="ubuntu:22.04", name="box", mounts=("/data:/data", "/scratch"))
    assert container_options(named, "warm")[1:] == (
        "--container-name=box",
        "--container-mounts=/data:/data,/scratch",
    )
    assert container_options(None, "warm") == ()


def test_srun_argv_names_the_step_with_its_tag() -> None:
    request = StepRequest(
        allocation_id="12",
        script=Path("/r/runs/train/logs/step.sh"),
        workdir=Path("/r/runs/train"),
        log_dir=Path("/r/100%/logs"),
        shape=RunResources(cpus="2"),
        container=Container(image="ubuntu:22.04"),
        container_name="warm",
        tag=TRAIN,
    )
    assert srun(request) == [
        "srun",
        "--jobid=12",
        "--overlap",
        "--job-name=recon2:demo:0123456789ab:run:train:00112233445566ff",
        "--chdir=/r/runs/train",
        "--output=/r/100%%/logs/slurm-%j.%s.out",
        "--error=/r/100%%/logs/slurm-%j.%s.err",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=2",
        "--container-image=ubuntu:22.04",
        "--container-name=warm",
        "bash",
        "/r/runs/train/logs/step.sh",
    ]


def test_step_named_finds_the_newest_step_of_that_job_and_name() -> None:
    listing = (
        "12.0|recon2:demo:0123456789ab:alloc:warm:0123456789abcdef\n"
        "12.1|recon2:demo:0123456789ab:run:train:00112233445566ff\n"
        "13.0|recon2:demo:0123456789ab:run:train:00112233445566ff\n"
        "12.4|recon2:demo:0123456789ab:run:train:00112233445566ff\n"
        "12.batch|recon2:demo:0123456789ab:run:train:00112233445566ff\n"
    )
    assert step_named(listing, "12", TRAIN) == "12.4"
    assert step_named(listing, "14", TRAIN) is None


# As pyxis prints its options in `srun --help` (the dev cluster has no pyxis).
SLURM_ONLY = "      --container             Path to OCI container bundle\n"
PYXIS_IMAGE = "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n"
PYXIS_OPTIONS = (
    "      --container-workdir=PATH\n"
    "                              [pyxis] working directory inside the container\n"
    "      --container-writable    [pyxis] make the container filesystem writable\n"
)


def test_pyxis_and_its_options_are_told_by_their_flags_in_srun_help() -> None:
    assert container_features(SLURM_ONLY) == frozenset()
    assert container_features(SLURM_ONLY + PYXIS_IMAGE) == {"image"}
    assert container_features(SLURM_ONLY + PYXIS_IMAGE + PYXIS_OPTIONS) == {
        "image",
        "writable",
        "workdir",
    }
    # Without pyxis's image flag, nothing: the options alone are not pyxis.
    assert container_features(PYXIS_OPTIONS) == frozenset()


def test_writable_and_workdir_are_pyxis_flags() -> None:
    box = Container(image="ubuntu:22.04", writable=True, workdir="/workspace")
    assert container_options(box, "warm") == (
        "--container-image=ubuntu:22.04",
        "--container-name=warm",
        "--container-writable",
        "--container-workdir=/workspace",
    )
    assert box.features == {"image", "writable", "workdir"}
    assert Container(image="ubuntu:22.04").features == {"image"}
    with pytest.raises(ValueError, match="not an absolute path"):
        Container(image="ubuntu:22.04", workdir="workspace")


def test_a_container_without_its_options_keeps_the_hash_it_had_before_them() -> None:
    # Computed before containers took writable and workdir (see the account pin above).
    spec = Allocation.model_validate(
        {"kind": "Allocation", "name": "warm", "time_limit": "1h",
         "container": {"image": "ubuntu:22.04", "mounts": ["/data:/data"]}}
    )  # fmt: skip
    assert spec_hash(spec) == "540e62a97c1ed733"
    assert spec.container is not None
    writable = spec.model_copy(
        update={"container": spec.container.model_copy(update={"writable": True})}
    )
    assert spec_hash(writable) != "540e62a97c1ed733"


def test_a_step_runs_without_slurm_input_variables_of_an_enclosing_job() -> None:
    environment = _step_environment(
        {
            "PATH": "/bin",
            "SLURM_NTASKS": "4",
            "SLURM_CPUS_PER_TASK": "8",
            "SRUN_CPUS_PER_TASK": "8",
            "SBATCH_PARTITION": "gpu",
            "SLURM_CONF": "/etc/slurm/slurm.conf",
        }
    )
    assert environment == {"PATH": "/bin", "SLURM_CONF": "/etc/slurm/slurm.conf"}


# -- start_step against a fake runner and a fake srun ------------------------------------


class FakeSrun:
    """A started srun: still running for `runs_for` polls, then exited with `exit_code`."""

    def __init__(self, runs_for: int, exit_code: int = 0) -> None:
        self.runs_for = runs_for
        self.exit_code = exit_code
        self.argv: list[str] = []
        self.log: Path | None = None

    def __call__(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> FakeSrun:
        self.argv, self.log = list(argv), log
        return self

    def poll(self) -> int | None:
        if self.runs_for > 0:
            self.runs_for -= 1
            return None
        return self.exit_code


def request(tmp_path: Path) -> StepRequest:
    return StepRequest(
        allocation_id="12",
        script=tmp_path / "step.sh",
        workdir=tmp_path,
        log_dir=tmp_path,
        shape=None,
        tag=TRAIN,
    )


def stepper(runner: ScriptedRunner, srun_process: FakeSrun, sleeps: list[float]) -> SlurmScheduler:
    return SlurmScheduler(
        runner, sleep=sleeps.append, clock=lambda: NOW, tz=UTC, spawn=srun_process
    )


LISTED = (
    "12.3|RUNNING|2026-11-29T22:41:04|cpu1|recon2:demo:0123456789ab:run:train:00112233445566ff\n"
)


def test_start_step_returns_the_id_squeue_lists(tmp_path: Path) -> None:
    runner = ScriptedRunner(squeue=[ok(""), ok(LISTED)])
    process = FakeSrun(runs_for=10)
    sleeps: list[float] = []
    assert stepper(runner, process, sleeps).start_step(request(tmp_path)) == "12.3"
    assert process.argv[:3] == ["srun", "--jobid=12", "--overlap"]  # setup overlaps
    assert process.log == tmp_path / "srun-train.log"
    assert runner.commands() == ["squeue", "squeue"] and len(sleeps) == 1


def test_a_step_that_ended_before_squeue_saw_it_is_found_in_sacct(tmp_path: Path) -> None:
    runner = ScriptedRunner(squeue=[ok("")], sacct=[ok(""), ok("12.3|" + TRAIN.format() + "\n")])
    found = stepper(runner, FakeSrun(runs_for=0), []).start_step(request(tmp_path))
    assert found == "12.3"
    assert runner.commands() == ["squeue", "sacct", "sacct"]


def test_srun_that_made_no_step_is_refused_with_its_words(tmp_path: Path) -> None:
    (tmp_path / "srun-train.log").write_text(
        "srun: error: Unable to create step for job 12: Memory required by task is not available\n"
    )
    runner = ScriptedRunner(squeue=[ok("")], sacct=[ok("")])
    with pytest.raises(PermanentSchedulerError, match="Memory required by task") as raised:
        stepper(runner, FakeSrun(runs_for=0, exit_code=1), []).start_step(request(tmp_path))
    assert "started no step in allocation 12" in str(raised.value)


def test_a_step_still_waiting_for_room_is_left_to_be_found_by_name(tmp_path: Path) -> None:
    runner = ScriptedRunner(squeue=[ok("")])
    sleeps: list[float] = []
    started = stepper(runner, FakeSrun(runs_for=10_000), sleeps).start_step(request(tmp_path))
    assert started is None
    assert sum(sleeps) == pytest.approx(10.0)  # STEP_LISTED_WAIT


def test_srun_that_cannot_be_started_is_refused(tmp_path: Path) -> None:
    def missing(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> FakeSrun:
        raise FileNotFoundError(2, "No such file or directory", "srun")

    scheduler = SlurmScheduler(ScriptedRunner(), sleep=lambda _s: None, tz=UTC, spawn=missing)
    with pytest.raises(PermanentSchedulerError, match="srun could not be started"):
        scheduler.start_step(request(tmp_path))


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ok(PYXIS_IMAGE), {"image"}),
        (ok(PYXIS_IMAGE + PYXIS_OPTIONS), {"image", "writable", "workdir"}),
        (ok(SLURM_ONLY), set()),
        (subprocess.CompletedProcess([], 127, "", "srun: not found"), set()),
    ],
)
def test_containers_asks_srun_help_once(
    result: subprocess.CompletedProcess[str], expected: set[str]
) -> None:
    runner = ScriptedRunner(srun=[result])
    assert SlurmScheduler(runner, tz=UTC).containers() == expected
    assert [argv for argv, _ in runner.calls] == [["srun", "--help"]]


def test_observe_looks_at_launchers_before_squeue() -> None:
    # A step srun held back is made, and listed, once it stops waiting: looked at after
    # squeue, its launcher could be gone and its step not yet listed by sacct.
    runner = ScriptedRunner(squeue=[ok("")], sacct=[ok("")])

    def launchers() -> tuple[Launch, ...]:
        runner.calls.append((["launchers"], None))
        return (Launch(allocation_id="12", tag=TRAIN),)

    scheduler = SlurmScheduler(runner, clock=lambda: NOW, tz=UTC, launches=launchers)
    observation = scheduler.observe(NOW - timedelta(days=1))
    assert observation.launches == (Launch(allocation_id="12", tag=TRAIN),)
    assert runner.commands() == ["launchers", "squeue", "sacct"]
    unknown = SlurmScheduler(runner, clock=lambda: NOW, tz=UTC, launches=lambda: None)
    assert unknown.observe(NOW - timedelta(days=1)).launches is None


def test_a_run_without_a_step_layout_keeps_the_hash_it_had_before_layouts() -> None:
    # Computed before runs took ntasks and ntasks_per_node: a step or job made by an
    # older recon stays its run's current one, not "spec changed".
    def hashed(**resources: object) -> str:
        return spec_hash(
            Run.model_validate(
                {"kind": "Run", "name": "train", "command": "python3 t.py",
                 "allocation": "warm", "resources": resources}
            )
        )  # fmt: skip

    assert hashed(cpus=2, memory="1GiB", gpus="a100:1", time="10m") == "839c16b1fae67df4"
    assert hashed(cpus=2, memory="1GiB", gpus="a100:1", time="10m", ntasks=2) != (
        "839c16b1fae67df4"
    )
    batch = Run.model_validate(
        {"kind": "Run", "name": "train", "command": "python3 t.py",
         "resources": {"nodes": 2, "cpus": 2, "partition": "cpu"}}
    )  # fmt: skip
    assert spec_hash(batch) == "b9bf84b2f9cbe155"
