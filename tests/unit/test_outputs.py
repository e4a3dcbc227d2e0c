from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.desired import Desired, DesiredRun, Location, effective_run, spec_hash
from reconciler.desired.models import Project, Run
from reconciler.errors import OutputError
from reconciler.state import outputs
from reconciler.state.outputs import (
    OutputVersion,
    observe_inputs,
    observe_outputs,
    version_of,
)

T1 = 1_700_000_000_000_000_000  # mtimes in ns, set explicitly: a test never races the clock
T2 = T1 + 1_000


def write(path: Path, data: bytes, mtime_ns: int = T1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def tree(root: Path) -> Path:
    write(root / "a.txt", b"alpha")
    write(root / "sub" / "b.bin", b"\x00\x01\x02")
    write(root / "sub" / "deeper" / "c", b"")
    return root


# A single file -------------------------------------------------------------------------


def test_a_content_identical_rewrite_keeps_the_content_digest_and_changes_the_fingerprint(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "model.json", b'{"w": 1}')
    before = (version_of(path, "fingerprint"), version_of(path, "content"))
    write(path, b'{"w": 1}', mtime_ns=T2)
    after = (version_of(path, "fingerprint"), version_of(path, "content"))
    assert after[0] != before[0]
    assert after[1] == before[1]


def test_a_single_file_content_digest_is_its_plain_sha256(tmp_path: Path) -> None:
    path = write(tmp_path / "model.json", b"weights")
    assert version_of(path, "content") == OutputVersion(
        kind="content", digest=hashlib.sha256(b"weights").hexdigest(), files=1, bytes=7
    )


def test_a_changed_byte_of_the_same_size_and_mtime_changes_only_the_content_digest(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "out", b"aaaa")
    before = (version_of(path, "fingerprint"), version_of(path, "content"))
    write(path, b"aaab")
    after = (version_of(path, "fingerprint"), version_of(path, "content"))
    assert after[0] == before[0]  # the documented blind spot of a fingerprint
    assert after[1] != before[1]


def test_a_missing_output_has_no_version(tmp_path: Path) -> None:
    assert version_of(tmp_path / "nothing", "fingerprint") is None
    assert version_of(tmp_path / "nothing" / "below", "content") is None
    file = write(tmp_path / "file", b"x")
    assert version_of(file / "below", "fingerprint") is None  # a path through a file


def test_a_declared_marker_decides_whether_the_output_is_there(tmp_path: Path) -> None:
    data = write(tmp_path / "ckpt" / "step-100.pt", b"w")
    marker = tmp_path / "ckpt" / "DONE"
    assert version_of(data.parent, "fingerprint", marker) is None
    marker.touch()
    assert version_of(data.parent, "fingerprint", marker) is not None
    marker.unlink()
    assert version_of(data.parent, "fingerprint", marker) is None


def test_an_output_that_is_a_symlink_is_followed(tmp_path: Path) -> None:
    scratch = tree(tmp_path / "scratch")
    link = tmp_path / "run" / "data"
    link.parent.mkdir()
    link.symlink_to(scratch)
    assert version_of(link, "content") == version_of(scratch, "content")
    (tmp_path / "run" / "dangling").symlink_to(tmp_path / "gone")
    assert version_of(tmp_path / "run" / "dangling", "content") is None


# A directory ---------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["fingerprint", "content"])
def test_a_directory_changes_version_when_a_file_inside_changes(tmp_path: Path, how: Any) -> None:
    root = tree(tmp_path / "out")
    before = version_of(root, how)
    write(root / "sub" / "b.bin", b"\x00\x01\x03", mtime_ns=T2)
    after = version_of(root, how)
    assert before is not None and after is not None
    assert after.digest != before.digest
    assert (after.files, after.bytes, after.directory) == (3, 8, True)


@pytest.mark.parametrize(
    "change",
    [
        lambda root: write(root / "new.txt", b""),
        lambda root: (root / "sub" / "deeper" / "c").unlink(),
        lambda root: (root / "a.txt").rename(root / "A.txt"),
        lambda root: (root / "empty").mkdir(),
        lambda root: (root / "sub" / "b.bin").rename(root / "b.bin"),
    ],
    ids=["file added", "file removed", "file renamed", "empty dir added", "file moved up"],
)
def test_any_change_to_a_directory_tree_changes_its_content_digest(
    tmp_path: Path, change: Any
) -> None:
    root = tree(tmp_path / "out")
    before = version_of(root, "content")
    change(root)
    assert version_of(root, "content") != before


@pytest.mark.parametrize("how", ["fingerprint", "content"])
def test_the_same_tree_in_two_places_has_the_same_version(tmp_path: Path, how: Any) -> None:
    assert version_of(tree(tmp_path / "one"), how) == version_of(tree(tmp_path / "two"), how)


def test_a_directory_and_a_file_of_the_same_bytes_differ(tmp_path: Path) -> None:
    file = write(tmp_path / "f" / "x", b"same")
    assert version_of(file, "content") != version_of(file.parent, "content")


def test_a_symlink_inside_is_recorded_by_its_target_and_never_followed(tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere" / "big.dat", b"one")
    root = tree(tmp_path / "out")
    (root / "link").symlink_to(outside)
    (root / "loop").symlink_to(root)  # would never end if it were followed
    before = version_of(root, "content")
    write(outside, b"two, longer", mtime_ns=T2)
    assert version_of(root, "content") == before
    assert before is not None and before.files == 3  # links are not files of the output
    (root / "link").unlink()
    (root / "link").symlink_to(tmp_path / "elsewhere" / "other.dat")
    assert version_of(root, "content") != before


def test_recons_own_bookkeeping_is_not_part_of_an_output(tmp_path: Path) -> None:
    root = tree(tmp_path / "run")
    before = version_of(root, "fingerprint")
    write(root / ".recon-run" / "manifest.json", b"{}")
    write(root / "sub" / ".recon-run" / "x", b"{}")
    # .recon: an earlier release's bookkeeping, or the state directory of a run at the root
    write(root / ".recon" / "manifest.json", b"{}")
    write(root / "sub" / ".recon" / "x", b"{}")
    assert version_of(root, "fingerprint") == before


def test_file_names_that_are_not_utf8_are_hashed(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    for name in (b"caf\xe9", b"caf\xc3\xa9"):  # latin-1 and utf-8 bytes of the same word
        descriptor = os.open(os.path.join(os.fsencode(root), name), os.O_CREAT | os.O_WRONLY)
        os.close(descriptor)
    version = version_of(root, "content")
    assert version is not None and version.files == 2
    os.unlink(os.path.join(os.fsencode(root), b"caf\xe9"))
    assert version_of(root, "content") != version


def test_an_unreadable_directory_is_an_error_not_a_missing_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "out")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if os.fspath(path).endswith("sub"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    # Tests run as root, which no file mode stops; the refusal is made at the OS seam.
    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(OutputError, match=r"cannot read .*out/sub: Permission denied"):
        version_of(root, "fingerprint")


def test_a_file_removed_while_the_tree_is_walked_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "out")
    real_walk = outputs._walk

    def walk_then_remove(directory: Any, prefix: str) -> Iterator[Any]:
        for entry in real_walk(directory, prefix):
            if entry.relative == "a.txt":
                os.unlink(entry.path)  # gone between the listing and the read
            yield entry

    monkeypatch.setattr(outputs, "_walk", walk_then_remove)
    version = version_of(root, "content")
    assert version is not None and version.files == 2


# Content digests remembered between looks --------------------------------------------


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files whose bytes are read, in order; a fresh memory of digests."""
    seen: list[str] = []
    real = hashlib.file_digest

    def counting(stream: Any, name: str) -> Any:
        seen.append(stream.name)
        return real(stream, name)

    monkeypatch.setattr(hashlib, "file_digest", counting)
    monkeypatch.setattr(outputs, "_DIGESTS", {})
    return seen


def test_an_unchanged_settled_file_is_read_once(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "_SETTLED_NS", 0)  # every file counts as settled
    root = tree(tmp_path / "out")
    first = version_of(root, "content")
    assert version_of(root, "content") == first
    assert len(reads) == 3


def test_a_rewrite_that_restores_size_and_mtime_is_read_again(
    tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "_SETTLED_NS", 0)
    path = write(tmp_path / "model.bin", b"aaaa")
    before = version_of(path, "content")
    time.sleep(0.05)  # past the filesystem clock's tick, so that the ctime moves
    write(path, b"bbbb")  # same size, and write() sets the same mtime back
    assert version_of(path, "content") != before
    assert len(reads) == 2


def test_a_file_written_just_now_is_not_remembered(tmp_path: Path, reads: list[str]) -> None:
    path = write(tmp_path / "model.bin", b"aaaa")
    version_of(path, "content")
    version_of(path, "content")
    assert len(reads) == 2  # a second write in the same clock tick would look unchanged


# Observing a project's runs ------------------------------------------------------------


def make_desired(root: Path, *specs: dict[str, Any]) -> Desired:
    project = Project(project="demo")
    runs = {}
    for index, fields in enumerate(specs):
        spec = effective_run(
            Run.model_validate({"kind": "Run", "command": "true", **fields}), project
        )
        runs[spec.name] = DesiredRun(
            spec, location=Location("specs/a.yaml", index), spec_hash=spec_hash(spec)
        )
    return Desired(project, root, None, runs, {}, {})


def test_observe_outputs_looks_in_each_runs_directory_with_its_hash_and_marker(
    tmp_path: Path,
) -> None:
    desired = make_desired(
        tmp_path,
        {"name": "prep", "outputs": {"data": {"path": "data.csv", "hash": "content"}}},
        {
            "name": "train",
            "inputs": {"data": "prep.data"},
            "outputs": {
                "model": "model.pt",
                "ckpt": {"path": "ckpt/", "marker": "ckpt/DONE"},
                "log": "/abs/not/there.log",
            },
        },
    )
    write(tmp_path / "runs" / "prep" / "data.csv", b"1,2\n")
    write(tmp_path / "runs" / "train" / "model.pt", b"w")
    write(tmp_path / "runs" / "train" / "ckpt" / "step-1", b"w")

    versions = observe_outputs(desired, ["prep", "train"])

    assert versions == {
        ("prep", "data"): OutputVersion(
            kind="content", digest=hashlib.sha256(b"1,2\n").hexdigest(), files=1, bytes=4
        ),
        ("train", "model"): version_of(tmp_path / "runs" / "train" / "model.pt", "fingerprint"),
        ("train", "ckpt"): None,  # no DONE marker yet
        ("train", "log"): None,
    }
    assert observe_outputs(desired, ["prep"]).keys() == {("prep", "data")}


def test_observe_inputs_versions_only_external_paths(tmp_path: Path) -> None:
    desired = make_desired(
        tmp_path,
        {"name": "prep", "outputs": {"data": "data.csv"}},
        {
            "name": "train",
            "inputs": {
                "data": "prep.data",
                "ref": {"path": "reference/genome.fa"},
                "extra": {"path": str(tmp_path / "absent")},
            },
        },
    )
    genome = write(tmp_path / "reference" / "genome.fa", b">chr1\nACGT\n")

    assert observe_inputs(desired, ["prep", "train"]) == {
        ("train", "ref"): version_of(genome, "fingerprint"),
        ("train", "extra"): None,
    }
    content = observe_inputs(desired, ["train"], how="content")[("train", "ref")]
    assert content is not None and content.digest == hashlib.sha256(b">chr1\nACGT\n").hexdigest()


def test_an_output_is_looked_at_once_per_pass_however_many_runs_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judgement of 1,000 finished readers and the plan after it share what the pass
    found (`seen_this_pass`): the shared dataset is looked at once, not once per reader."""
    readers = [
        {"name": f"r{i}", "inputs": {"data": "prep.data"}, "outputs": {"m": "m.pt"}}
        for i in range(1000)
    ]
    desired = make_desired(tmp_path, {"name": "prep", "outputs": {"data": "d.csv"}}, *readers)
    looked: list[str] = []
    real = outputs.version_of

    def counting(path: Any, *more: Any) -> Any:
        looked.append(os.fspath(path))
        return real(path, *more)

    monkeypatch.setattr(outputs, "version_of", counting)
    seen: outputs.OutputsSeen = {}
    for i in range(1000):  # as settle.judge does, one finished reader at a time
        observe_outputs(desired, [f"r{i}"], seen)
        observe_outputs(desired, ["prep"], seen)
    observe_outputs(desired, sorted(desired.runs), seen)  # as the plan's file state does
    assert len(looked) == 1001  # each reader's model once, the dataset once
