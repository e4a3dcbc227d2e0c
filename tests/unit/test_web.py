"""`recon serve`'s pure parts: the graph as SVG, the spec as committed with its env
masked, the confinement of paths, and the poller's one look per interval."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.engine.plan.actions import SyncStatus
from reconciler.errors import ObservationError
from reconciler.report.graph import Graph, Node, as_svg, graph_of, layers
from reconciler.scheduler.states import Health
from reconciler.web.files import confined, tail
from reconciler.web.poller import Poller
from reconciler.web.snapshot import _document_at, _masked
from tests.planning import desired, run
from tests.unit.test_report_graph import status

SVG = "{http://www.w3.org/2000/svg}"


def drawn_as(node: ET.Element, shape: str, attribute: str) -> str:
    """An attribute of the node's first ``shape``, which must be drawn and have it."""
    found = node.find(f"{SVG}{shape}")
    assert found is not None, f"no {shape} drawn"
    value = found.get(attribute)
    assert value is not None, f"the {shape} has no {attribute}"
    return value


def test_the_svg_draws_each_node_with_its_state_left_to_right_by_depth() -> None:
    state = desired(run("prep"), run("train", "prep"), run("eval", "prep", "train"))
    rows = [
        status("prep", SyncStatus.CURRENT, Health.SUCCEEDED),
        status("train", SyncStatus.OUTDATED, Health.FAILED),
        status("eval", SyncStatus.NEVER_RUN, None),
    ]
    drawn = graph_of(state, None, rows)
    assert layers(drawn) == {"prep": 0, "train": 1, "eval": 2}
    root = ET.fromstring(as_svg(drawn))
    nodes = {g.get("data-name"): g for g in root.iter(f"{SVG}g")}
    assert {name: (g.get("data-sync"), g.get("data-health")) for name, g in nodes.items()} == {
        "prep": ("current", "succeeded"),
        "train": ("outdated", "failed"),
        "eval": ("never run", ""),
    }
    x = {name: float(drawn_as(g, "rect", "x")) for name, g in nodes.items()}
    assert x["prep"] < x["train"] < x["eval"]
    # The failed run red, filled and thick, though outdated: a failure is not missed.
    assert drawn_as(nodes["train"], "rect", "fill") == "#fbd5d5"
    assert drawn_as(nodes["train"], "rect", "stroke") == "#c53030"
    assert drawn_as(nodes["train"], "rect", "stroke-width") == "4"
    assert drawn_as(nodes["prep"], "rect", "stroke-width") == "2"
    assert drawn_as(nodes["train"], "circle", "fill") == "#c53030"
    assert nodes["eval"].find(f"{SVG}circle") is None  # no job: no health dot
    assert len([p for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]) == 3


def test_the_svg_escapes_text_and_counts_what_it_leaves_out() -> None:
    nasty = Node('a<b>&"c"', sync="current")
    text = as_svg(Graph([nasty, Node("d")], [], left_out=7))
    root = ET.fromstring(text)  # well-formed: the name cannot break out of its markup
    (first, _second) = [g for g in root.iter(f"{SVG}g")]
    assert first.get("data-name") == 'a<b>&"c"'
    assert "<b>" not in text
    assert any(t.text == "and 7 more" for t in root.iter(f"{SVG}text"))


SPEC_FILE = """\
# a comment before the first document
kind: Run
name: first
command: echo one
env:
  TOKEN: abc123  # why it is here
  MODE: fast
---
kind: Run
name: second
command: echo two
"""


def test_the_spec_shown_is_the_runs_own_document_with_env_values_masked() -> None:
    first = _masked(_document_at(SPEC_FILE, 2))
    assert "name: first" in first and "name: second" not in first
    assert "abc123" not in first and "fast" not in first
    assert "TOKEN: (hidden)" in first and "# why it is here" in first
    assert first.startswith("# a comment before the first document\n")
    second = _masked(_document_at(SPEC_FILE, 9))
    assert second == "kind: Run\nname: second\ncommand: echo two\n"


def test_only_files_that_resolve_inside_a_root_are_read(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "a"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "job.out").write_text("".join(f"line {n}\n" for n in range(500)))
    outside = tmp_path / "secret"
    outside.write_text("secret\n")
    (root / "logs" / "link.out").symlink_to(outside)
    (root / "logs" / "loop.out").symlink_to(root / "logs" / "loop.out")
    assert confined(root / "logs" / "job.out", [root]) == root / "logs" / "job.out"
    assert confined(root / "logs" / ".." / ".." / ".." / "secret", [root]) is None
    assert confined(root / "logs" / "link.out", [root]) is None
    assert confined(root / "logs" / "loop.out", [root]) is None
    assert confined(root / "missing", [root]) is None
    assert tail(root / "logs" / "link.out", [root]) is None
    shown = tail(root / "logs" / "job.out", [root])
    assert shown is not None and shown.splitlines()[-1] == "line 499"
    assert len(shown.splitlines()) == 200


def test_the_poller_keeps_the_last_good_look_and_moves_its_version_only_on_change(
    tmp_path: Path,
) -> None:
    from reconciler.engine.reconcile import Look, Request, look_once
    from tests.local.serving import example_project

    root = example_project(tmp_path)
    answers: list[object] = ["look", "look", ObservationError("sacct: timed out"), "look"]

    def look() -> Look:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return look_once(Request(root, scheduler="local"))

    poller = Poller(
        look, interval=60, graph_limit=200, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC)
    )
    poller.poll_once()
    first = poller.seen()
    assert first.version == 1 and first.snapshot is not None and first.error is None
    poller.poll_once()  # the same world: the same version, pages do not refetch
    second = poller.seen()
    assert second.version == 1 and second.looks == 2
    poller.poll_once()
    failed = poller.seen()
    assert failed.version == 2 and failed.error == "sacct: timed out"
    assert failed.snapshot is second.snapshot  # the last good picture stays
    poller.poll_once()
    assert poller.seen().version == 3 and poller.seen().error is None


def test_a_waiting_stream_wakes_on_a_new_version() -> None:
    poller = Poller(
        lambda: (_ for _ in ()).throw(ObservationError("down")), interval=60, graph_limit=200
    )
    woke: list[int] = []
    waiter = threading.Thread(target=lambda: woke.append(poller.wait_for_change(0, 30).version))
    waiter.start()
    poller.poll_once()
    waiter.join(timeout=10)
    assert woke == [1]


@pytest.mark.parametrize("line", [1, 2, 7])
def test_a_line_of_the_first_document_finds_it(line: int) -> None:
    assert "name: first" in _document_at(SPEC_FILE, line)


def test_a_run_that_left_the_repo_is_drawn_as_an_orphan() -> None:
    state = desired(run("kept"))
    rows = [
        status("kept", SyncStatus.CURRENT, Health.SUCCEEDED),
        status("gone", SyncStatus.ORPHAN, Health.RUNNING),
    ]
    drawn = graph_of(state, None, rows)
    assert [(n.name, n.sync, n.health) for n in drawn.nodes] == [
        ("kept", "current", "succeeded"),
        ("gone", "orphan", "running"),
    ]
    assert drawn.nodes[1].colours == ("#e2e8f0", "#4a5568")


def test_recon_graph_writes_the_svg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli import recon
    from tests.local.serving import example_project

    monkeypatch.chdir(example_project(tmp_path))
    result = recon(capsys, "graph", "--offline", "--format", "svg")
    assert result.code == 0, result.err
    names = {g.get("data-name") for g in ET.fromstring(result.out).iter(f"{SVG}g")}
    # The example's sweep is one node: seeds (6 members).
    assert names == {
        "interactive",
        "actor-learner",
        "prepare",
        "train",
        "evaluate",
        "seeds",
        "compare",
    }


def test_the_page_draws_at_most_the_limit_and_lists_every_run(tmp_path: Path) -> None:
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.snapshot import snapshot_of
    from tests.local.serving import example_project

    look = look_once(Request(example_project(tmp_path), scheduler="local"))
    shown = snapshot_of(look, datetime(2026, 1, 1, tzinfo=UTC), graph_limit=2)
    assert shown.graph_svg.count('class="node"') == 2 and "and 5 more" in shown.graph_svg
    rows = shown.summary()["runs"]
    # every run, each member of the sweep too: under its sweep's row
    assert sum(len(row.get("members", [row])) for row in rows) == 11
