"""Behaviour keys on types, never on wording: no module of recon compares, searches or
matches the words of a reason, a message or an explanation (a job's reason, an error's
text, a pull's why) to decide what to do. Such words are for people and may be
reworded; what a program needs to tell apart is a value of its own (``EndingKind``,
``Cause``, a flag).

The scan reads every module's syntax tree for comparisons (``==``, ``!=``, ``in``,
``not in``), prefix and suffix tests and regular expressions whose operand is named as
words are (``reason``, ``why``, ``message``, ``words``, or an exception as ``str(error)``).
The few places where the text is genuinely what is read are allowed below, each with its
reason."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import reconciler

ROOT = Path(reconciler.__file__).parent
WORDS = frozenset({"reason", "why", "message", "words"})
ERRORS = frozenset({"error", "exc", "err", "e", "exception"})
SEARCHES = frozenset({"startswith", "endswith", "find", "rfind", "index", "count"})
REGEXES = frozenset({"match", "search", "fullmatch", "findall", "finditer"})

# (module, function) -> why comparing its text is right there.
ALLOWED: dict[tuple[str, str], str] = {
    ("scheduler/states.py", "held_in_queue"): "Slurm's reason codes are Slurm's output, "
    "read here once into Health and held-ness",
    ("scheduler/states.py", "health_of"): "the same: Slurm's reason code for a failed launch",
    ("scheduler/states.py", "in_words"): "the same: Slurm's held reasons, said back in words",
    ("scheduler/states.py", "waited_for_dependency"): "the same: Slurm's Dependency* codes",
    ("scheduler/local/decide.py", "_dooms"): "the local backend plays Slurm, whose reason "
    "code DependencyNeverSatisfied is the state it keeps of a doomed job",
    ("scheduler/local/records.py", "observed_array"): "the same: its own reason code for an "
    "array task cancelled alone, which Slurm would not list",
    ("desired/yamlsource.py", "_explain"): "PyYAML's error message, which is all it says of a "
    "mapping value where none may be: the advice for it is chosen from that text",
    ("report/status.py", "health_words"): "composes words for people (no parentheses "
    "within parentheses), deciding nothing",
    ("web/snapshot.py", "why_words"): "composes words for people (what is said once), "
    "deciding nothing",
}


def _worded(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in WORDS
    if isinstance(node, ast.Attribute):
        return node.attr in WORDS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        argument = node.args[0]
        return node.func.id == "str" and isinstance(argument, ast.Name) and argument.id in ERRORS
    return False


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _keyed_on_words(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and (
                (_worded(left) or _worded(right)) and not (_is_none(left) or _is_none(right))
            ):
                return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in SEARCHES and _worded(node.func.value):
            return True
        if node.func.attr in REGEXES and any(_worded(arg) for arg in node.args):
            return True
    return isinstance(node, ast.Match) and _worded(node.subject)


_NAMED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Every node with the name of the function (or class) it is in, `<module>` outside."""
    stack: list[tuple[str, ast.AST]] = [("<module>", tree)]
    while stack:
        where, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, _NAMED) else where
            yield inner, child
            stack.append((inner, child))


def keyed_on_words(root: Path) -> dict[tuple[str, str], list[str]]:
    """(module, function) -> each comparison of words in it, as `line: code`."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for where, node in _functions(ast.parse(path.read_text(), str(path))):
            if _keyed_on_words(node):
                lineno = getattr(node, "lineno", 0)
                found.setdefault((module, where), []).append(f"{lineno}: {ast.unparse(node)}")
    return found


def test_no_behaviour_keys_on_the_wording_of_a_reason_or_message() -> None:
    found = keyed_on_words(ROOT)
    keyed = {place: lines for place, lines in found.items() if place not in ALLOWED}
    assert not keyed, (
        "behaviour keyed on wording (compare a value of its own instead, or allow it in "
        f"ALLOWED with the reason the text is what is read): {keyed}"
    )


def test_every_allowed_place_still_compares_words() -> None:
    """An allowance outliving its comparison would let a new one in unseen."""
    assert set(ALLOWED) <= set(keyed_on_words(ROOT))


def test_the_scan_finds_words_compared(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def a(record):\n    return record.reason == SKIPPED\n"
        "def b(error):\n    return 'not found' in str(error)\n"
        "def c(why):\n    return why.startswith('up to')\n"
        "def d(record):\n    return record.reason is None or record.ending == KIND\n"
    )
    assert set(keyed_on_words(tmp_path)) == {("m.py", "a"), ("m.py", "b"), ("m.py", "c")}
