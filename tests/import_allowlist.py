"""An import-linter contract type, ``allowlist``: a room of the code may import only the
modules its contract lists (and its own). pyproject.toml registers it (``contract_types``)
and lint-imports checks it beside the built-in contracts.

import-linter's own contracts name what may not be imported (``forbidden``); a room
kept pure that way is pure only of what someone thought to name, and a new module that
writes a file or a new standard library import slips through. An allowlist turns that
around: every module the room imports directly is one its contract names (a listed
package covers its modules), so a new dependency is a decision written in pyproject.toml.
What the listed modules import in turn is theirs to answer for: each is a value module,
and the "forbidden" contracts still follow chains to the modules that act.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain import helpers
from importlinter.domain.imports import ModuleExpression


class AllowlistContract(Contract):
    """``source_modules``: the room's packages; ``allowed_modules``: what they may import
    besides each other, each a package with its modules (``reconciler.desired.desired``,
    ``collections``)."""

    type_name = "allowlist"

    source_modules = fields.ListField(subfield=fields.ModuleExpressionField())
    allowed_modules = fields.ListField(subfield=fields.ModuleExpressionField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        room = self._names(graph, self.source_modules)
        allowed = self._names(graph, self.allowed_modules)
        unlisted = []
        for importer in sorted(_within(graph.modules, room)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if _within([imported], room | allowed):
                    continue
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = sorted(detail["line_number"] for detail in details)
                unlisted.append({"importer": importer, "imported": imported, "lines": lines})
        output.verbose_print(verbose, f"{len(unlisted)} imports not listed")
        return ContractCheck(kept=not unlisted, metadata={"unlisted": unlisted})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for unlisted in check.metadata["unlisted"]:
            lines = ", ".join(f"l.{line}" for line in unlisted["lines"]) or "l.?"
            output.print_error(
                f"{unlisted['importer']} imports {unlisted['imported']} ({lines}), "
                "which its contract does not list",
                bold=False,
            )
        output.new_line()

    @staticmethod
    def _names(graph: ImportGraph, expressions: object) -> set[str]:
        """The packages and modules the expressions name (``reconciler.engine.*`` too)."""
        assert isinstance(expressions, list)
        named: list[ModuleExpression] = expressions
        return {module.name for module in helpers.module_expressions_to_modules(graph, named)}


def _within(modules: Iterable[str], packages: Collection[str]) -> set[str]:
    """The modules that are one of ``packages`` or inside one."""
    return {
        module
        for module in modules
        if any(module == package or module.startswith(f"{package}.") for package in packages)
    }
