"""The ``allowlist`` contract type (tests/import_allowlist.py) on a small import graph: an
import its contract lists passes, any other breaks it, a room's own imports are free."""

from __future__ import annotations

import grimp

from tests.import_allowlist import AllowlistContract


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in ("app", "app.room", "app.room.a", "app.room.b", "app.values", "app.disk"):
        graph.add_module(module)
    graph.add_module("os", is_squashed=True)
    graph.add_module("json", is_squashed=True)
    for line, (importer, imported) in enumerate(imports, 1):
        graph.add_import(
            importer=importer, imported=imported, line_number=line, line_contents="import"
        )
    return graph


def _unlisted(graph: grimp.ImportGraph) -> list[tuple[str, str, list[int]]]:
    contract = AllowlistContract(
        "the room imports only what it lists",
        session_options={},
        contract_options={
            "source_modules": ["app.room"],
            "allowed_modules": ["app.values", "json"],
        },
    )
    check = contract.check(graph, verbose=False)
    found = [(u["importer"], u["imported"], u["lines"]) for u in check.metadata["unlisted"]]
    assert check.kept == (not found)
    return found


def test_listed_imports_and_the_rooms_own_pass() -> None:
    graph = _graph(
        ("app.room.a", "app.values"), ("app.room.a", "json"), ("app.room.a", "app.room.b")
    )
    assert _unlisted(graph) == []


def test_an_unlisted_import_breaks_it_with_where_it_is() -> None:
    graph = _graph(("app.room.a", "app.values"), ("app.room.b", "os"), ("app.room.b", "app.disk"))
    assert _unlisted(graph) == [("app.room.b", "app.disk", [3]), ("app.room.b", "os", [2])]


def test_what_a_listed_module_imports_is_not_the_rooms() -> None:
    """Chains are the forbidden contracts' to follow: the allowlist is the room's own code."""
    graph = _graph(("app.room.a", "app.values"), ("app.values", "os"))
    assert _unlisted(graph) == []
