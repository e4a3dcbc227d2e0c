"""The local backend's job directories: ids, the active list, windows and snapshots.

No process is started here: jobs are written and their facts recorded by hand.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.scheduler.local.decide import Cancel, Ending, Grant
from reconciler.scheduler.local.directives import Component, WarningSignal
from reconciler.scheduler.local.files import write_json
from reconciler.scheduler.local.store import ArrayTask, JobSpec, Store

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    created = Store(tmp_path / "local")
    created.prepare()
    return created


def add(store: Store, minute: int, after: tuple[int, ...] = ()) -> int:
    def build(_first: int, job_id: int) -> tuple[JobSpec, dict[str, str]]:
        spec = JobSpec(
            job_id=job_id,
            name="p.x",
            comment="recon2:p:0123456789ab:run:x:0123456789abcdef",
            workdir="/work",
            dependencies=after,
            components=(Component(2, 1), Component(1, 3)),
            stdout="/work/out",
            stderr=None,
            time_limit=600.0,
            submitted=T0 + timedelta(minutes=minute),
        )
        return spec, {"PATH": "/bin"}

    (spec,) = store.create(build, "#!/bin/sh\ntrue\n")
    return spec.job_id


def test_a_spec_reads_back_as_written_by_a_fresh_store(store: Store) -> None:
    job_id = add(store, 0, ())
    written = store.spec(job_id)
    assert Store(store.root).spec(job_id) == written
    assert written is not None and written.cpus == 5
    assert Store(store.root).spec(99) is None


def test_memory_and_the_warning_signal_read_back_and_older_specs_have_neither(
    store: Store,
) -> None:
    job_id = add(store, 0, ())
    written = store.spec(job_id)
    assert written is not None and written.memory_limit is None
    limited = replace(
        written,
        components=(Component(2, 1, 300), Component(1, 3, 100)),
        warning=WarningSignal(10, timedelta(seconds=30), batch_only=True),
    )
    assert JobSpec.from_json(limited.to_json()) == limited
    assert limited.memory_limit == 400 << 20
    # job.json as a recon without memory limits or warnings wrote it.
    older = {**written.to_json(), "components": [[2, 1], [1, 3]]}
    del older["warning"]
    assert JobSpec.from_json(older) == written


def ending(root: Path, job_id: int) -> Ending | None:
    """The job's ending as a fresh store reads it from its files."""
    fresh = Store(root)
    spec = fresh.spec(job_id)
    assert spec is not None
    return fresh.facts(spec).ended


def test_an_ending_by_memory_reads_back_and_older_endings_were_not(store: Store) -> None:
    job_id = add(store, 0, ())
    store.write_started(job_id, T0)
    store.write_ended(job_id, Ending(T0, 0, signal=9, out_of_memory=True))
    assert ending(store.root, job_id) == Ending(T0, 0, signal=9, out_of_memory=True)
    # ended.json as a recon without memory limits wrote it.
    older = {"at": T0.isoformat(), "exit_code": 0, "signal": 9, "timed_out": False}
    write_json(store.job_dir(job_id) / "ended.json", older)
    assert ending(store.root, job_id) == Ending(T0, 0, signal=9)


def test_gpus_and_the_grant_read_back_and_older_jobs_had_neither(store: Store) -> None:
    job_id = add(store, 0, ())
    written = store.spec(job_id)
    assert written is not None and written.gpus == 0
    with_gpus = replace(written, components=(Component(2, 1, None, 2), Component(1, 3)))
    assert JobSpec.from_json(with_gpus.to_json()) == with_gpus
    assert with_gpus.gpus == 2
    # job.json as a recon without GPUs wrote it: memory, no GPU count.
    older = {**written.to_json(), "components": [[2, 1, None], [1, 3, None]]}
    assert JobSpec.from_json(older) == written
    assert store.gpus() == ()
    store.set_gpus(("0", "GPU-1f2e"))
    assert Store(store.root).gpus() == ("0", "GPU-1f2e")
    store.write_started(job_id, T0, Grant(gpus=("GPU-1f2e",), cores=(1,)))
    assert store.grant(job_id) == Grant(gpus=("GPU-1f2e",), cores=(1,))
    assert Store(store.root).facts(written).grant == Grant(gpus=("GPU-1f2e",), cores=(1,))
    # started.json as a recon without GPUs wrote it: nothing handed out.
    write_json(store.job_dir(job_id) / "started.json", {"at": T0.isoformat()})
    assert store.grant(job_id) == Grant()


def test_jobs_are_active_until_final(store: Store) -> None:
    ran, waiting, cancelled_running = add(store, 0), add(store, 1), add(store, 2)
    assert store.active_ids() == [ran, waiting, cancelled_running]
    store.write_started(ran, T0)
    store.write_ended(ran, Ending(T0, 0))
    store.write_cancelled(waiting, Cancel(T0, 0))
    store.write_started(cancelled_running, T0)
    store.write_cancelled(cancelled_running, Cancel(T0, 0))  # its processes still run
    assert store.active_ids() == [cancelled_running]


@pytest.mark.parametrize(
    ("minute", "expected"), [(-5, [1, 2, 3, 4]), (0, [1, 2, 3, 4]), (2, [3, 4]), (9, [])]
)
def test_the_window_starts_at_the_first_job_submitted_since(
    store: Store, minute: int, expected: list[int]
) -> None:
    for submitted in (0, 1, 2, 3):
        add(store, submitted)
    assert Store(store.root).submitted_since(T0 + timedelta(minutes=minute)) == expected


def test_a_snapshot_brings_the_dependencies_of_waiting_jobs(store: Store) -> None:
    first = add(store, 0)
    second = add(store, 1, (first,))
    third = add(store, 2, (second,))
    store.write_started(first, T0)
    store.write_ended(first, Ending(T0, 1))
    snapshot = Store(store.root).snapshot([third])
    assert sorted(snapshot.facts) == [first, second, third]
    ended = snapshot.facts[first].ended
    assert ended is not None and ended.exit_code == 1


def test_an_unreadable_job_is_a_problem_not_an_error(store: Store) -> None:
    job_id = add(store, 0)
    (store.job_dir(job_id) / "job.json").write_text("{not json")
    snapshot = Store(store.root).snapshot([job_id])
    assert snapshot.facts == {}
    assert len(snapshot.problems) == 1 and f"local job {job_id}" in snapshot.problems[0]


def test_an_array_is_made_of_consecutive_jobs_that_read_back_as_its_tasks(store: Store) -> None:
    def build(first: int, job_id: int) -> tuple[JobSpec, dict[str, str]]:
        spec = JobSpec(
            job_id=job_id,
            name="p.x",
            comment="recon2:p:0123456789ab:run:x:0123456789abcdef",
            workdir="/work",
            dependencies=(),
            components=(Component(1, 1),),
            stdout=f"/work/out-{first}_{job_id - first}",
            stderr=None,
            time_limit=None,
            submitted=T0,
            array=ArrayTask(first, (0, 2, 5)[job_id - first], 3, 2),
        )
        return spec, {}

    made = store.create(build, "#!/bin/sh\ntrue\n", count=3)
    assert [spec.job_id for spec in made] == [1, 2, 3]
    fresh = Store(store.root)
    tasks = [fresh.spec(job_id) for job_id in (1, 2, 3)]
    assert tasks == made
    assert [task.array for task in tasks if task] == [
        ArrayTask(1, 0, 3, 2), ArrayTask(1, 2, 3, 2), ArrayTask(1, 5, 3, 2),
    ]  # fmt: skip
    first = made[0].array
    assert first is not None and list(first.job_ids) == [1, 2, 3]
    assert add(store, 0) == 4


def test_final_jobs_are_read_from_one_gathered_file_and_live_ones_from_their_own(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.scheduler.local import files
    from reconciler.scheduler.local import store as store_module

    ended, cancelled, running = add(store, 0), add(store, 1), add(store, 2)
    store.write_started(ended, T0)
    store.write_ended(ended, Ending(T0 + timedelta(minutes=3), 2))
    store.write_cancelled(cancelled, Cancel(T0, 0))
    store.write_started(running, T0)
    first = Store(store.root).snapshot([ended, cancelled, running], gathered=True)
    assert (store.root / "final.marshal").exists()

    opened: list[str] = []
    real_read = files.read_json  # what the store imported

    def counting(path: str | Path) -> dict[str, object] | None:
        opened.append(Path(path).parent.name)
        return real_read(path)

    monkeypatch.setattr(store_module, "read_json", counting)
    again = Store(store.root).snapshot([ended, cancelled, running], gathered=True)
    assert again.facts == first.facts and again.specs == first.specs
    assert set(opened) == {str(running)}  # the two final jobs came from final.marshal

    store.write_ended(running, Ending(T0 + timedelta(minutes=4), 0))
    opened.clear()
    later = Store(store.root).snapshot([ended, cancelled, running], gathered=True)
    assert later.facts[running].ended == Ending(T0 + timedelta(minutes=4), 0)
    assert set(opened) == {str(running)}
    opened.clear()
    Store(store.root).snapshot([ended, cancelled, running], gathered=True)
    assert opened == []  # now final, it joined them


def test_a_damaged_gathered_file_only_costs_reading_the_jobs_files(store: Store) -> None:
    ended = add(store, 0)
    store.write_started(ended, T0)
    store.write_ended(ended, Ending(T0, 0))
    expected = Store(store.root).snapshot([ended], gathered=True)
    (store.root / "final.marshal").write_bytes(b"\x00not marshal")
    assert Store(store.root).snapshot([ended], gathered=True).facts == expected.facts


def test_a_dispatch_pass_neither_reads_nor_writes_the_gathered_file(store: Store) -> None:
    ended = add(store, 0)
    store.write_started(ended, T0)
    store.write_ended(ended, Ending(T0, 0))
    Store(store.root).snapshot([ended])  # as dispatch reads its active jobs
    assert not (store.root / "final.marshal").exists()
    Store(store.root).snapshot([ended], gathered=True)  # as an observation does
    assert (store.root / "final.marshal").exists()


def test_what_a_job_used_reads_back_and_a_het_job_counts_its_cpu_time_once(
    store: Store,
) -> None:
    """The supervisor's peak memory and CPU time are kept in ended.json; a het job is one
    script, so its CPU time is on its first component's row alone (not once per
    component), its peak on each; an ending an older recon wrote has neither."""
    from reconciler.scheduler.local.decide import settled_status
    from reconciler.scheduler.local.records import observed_job
    from reconciler.scheduler.usage import usage_of

    het, old = add(store, 0), add(store, 1)
    for job_id in (het, old):
        store.write_started(job_id, T0)
    store.write_ended(
        het, Ending(T0 + timedelta(seconds=10), 0, peak_memory_mb=300.0, cpu_time_s=7.5)
    )
    store.write_ended(old, Ending(T0 + timedelta(seconds=10), 0))
    facts = Store(store.root).snapshot([het, old], gathered=True).facts
    rows = {}
    for job_id in (het, old):
        spec, status = store.spec(job_id), settled_status(facts[job_id])
        assert spec is not None and status is not None
        rows[job_id] = observed_job(spec, facts[job_id], status, "host", T0)
    job = rows[het]
    assert job is not None
    assert [row.peak_memory_mb for row in job.components] == [300.0, 300.0]
    assert [row.cpu_time for row in job.components] == [timedelta(seconds=7.5), None]
    usage = usage_of(job)
    assert usage is not None and (usage.peak_memory_mb, usage.cpu_time_s) == (300.0, 7.5)
    older = rows[old]
    assert older is not None and (usage := usage_of(older)) is not None
    assert (usage.peak_memory_mb, usage.cpu_time_s) == (None, None)
