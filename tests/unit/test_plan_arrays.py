"""Which job array each sweep member a plan submits goes in (``plan/arrays.place``), on
plain actions: the rule apply used to follow as it went, now the plan's."""

from __future__ import annotations

from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.arrays import place
from reconciler.engine.plan.causes import Cause


def submit(target: str, *after: str, after_jobs: tuple[str, ...] = (), **fields: object) -> Action:
    return Action(
        kind=ActionKind.SUBMIT,
        target=target,
        reason="not yet run",
        cause=Cause.NEVER_RUN,
        after=after,
        after_jobs=after_jobs,
        **fields,
    )


def placed(actions: list[Action], size: int | None = None) -> dict[str, tuple[int, int]]:
    return {
        action.target: (action.array.number, action.array.index)
        for action in place(actions, size)
        if action.array is not None
    }


def test_a_sweeps_members_go_in_one_array_in_the_plans_order() -> None:
    actions = [submit("prep"), *(submit(f"t[s={i}]", "prep") for i in range(3)), submit("agg")]
    assert placed(actions) == {"t[s=0]": (1, 0), "t[s=1]": (1, 1), "t[s=2]": (1, 2)}


def test_arrays_split_at_max_array_size() -> None:
    actions = [submit(f"t[s={i}]") for i in range(5)]
    assert placed(actions, size=2) == {
        "t[s=0]": (1, 0), "t[s=1]": (1, 1),
        "t[s=2]": (2, 0), "t[s=3]": (2, 1),
        "t[s=4]": (3, 0),
    }  # fmt: skip


def test_arrays_are_numbered_in_the_order_they_go() -> None:
    waits = {1: ("a",), 3: ("a",), 5: ("a",)}
    actions = [submit("a"), *(submit(f"e[s={i}]", *waits.get(i, ())) for i in range(6))]
    # All go at e[s=0]'s turn: the arrays of those that wait for nothing, then of the rest.
    assert placed(actions, size=2) == {
        "e[s=0]": (1, 0), "e[s=2]": (1, 1), "e[s=4]": (2, 0),
        "e[s=1]": (3, 0), "e[s=3]": (3, 1), "e[s=5]": (4, 0),
    }  # fmt: skip


def test_one_array_per_set_of_jobs_waited_for() -> None:
    actions = [
        submit("a"),
        submit("b"),
        submit("e[s=0]", "a"),
        submit("e[s=1]", "b"),
        submit("e[s=2]", "a"),
        submit("e[s=3]", after_jobs=("55",)),
    ]
    assert placed(actions) == {
        "e[s=0]": (1, 0), "e[s=2]": (1, 1), "e[s=1]": (2, 0), "e[s=3]": (3, 0)
    }  # fmt: skip


def test_a_member_waiting_for_a_later_run_goes_with_the_members_ready_then() -> None:
    actions = [
        submit("e[s=0]"),
        submit("late"),
        submit("e[s=1]", "late"),
        submit("e[s=2]"),
        submit("e[s=3]", "late"),
    ]
    # At e[s=0], `late` is not submitted yet: e[s=1] and e[s=3] go at e[s=1]'s turn.
    assert placed(actions) == {
        "e[s=0]": (1, 0), "e[s=2]": (1, 1), "e[s=1]": (2, 0), "e[s=3]": (2, 1)
    }  # fmt: skip


def test_a_member_waiting_for_a_member_of_its_own_sweep_goes_in_a_later_array() -> None:
    actions = [submit("t[s=0]"), submit("t[s=1]", "t[s=0]")]
    assert placed(actions) == {"t[s=0]": (1, 0), "t[s=1]": (2, 0)}


def test_sweeps_are_numbered_apart_and_steps_and_other_kinds_go_in_none() -> None:
    actions = [
        submit("a[s=0]"),
        submit("b[s=0]"),
        submit("a[s=1]", allocation_job="77"),  # a step in an allocation's job
        Action(kind=ActionKind.NOOP, target="a[s=2]", reason="current", cause=Cause.CURRENT),
        Action(
            kind=ActionKind.REPLACE, target="a[s=3]", reason="changed", cause=Cause.SPEC_CHANGED
        ),
        submit("plain"),
    ]
    assert placed(actions) == {"a[s=0]": (1, 0), "b[s=0]": (1, 0), "a[s=3]": (1, 1)}
