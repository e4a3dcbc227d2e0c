"""Whatever text or document reaches the loader, it answers with specs or a SpecError."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from reconciler.desired.documents import validate_spec
from reconciler.desired.loader import load_desired
from reconciler.desired.source import WorktreeSource
from reconciler.desired.yamlsource import parse_documents
from reconciler.errors import SpecError

YAML_ALPHABET = string.printable + "äß€\u2028\x85\t-:[]{}&*!|>'\"%@`#,?"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["8+", "32GB", "A100:4", "12:00:00", "Run", "Allocation", "x.y", "#SBATCH"]),
)
keys = st.one_of(
    st.sampled_from(
        [
            "kind",
            "name",
            "command",
            "script",
            "resources",
            "cpus",
            "memory",
            "gpus",
            "time",
            "components",
            "inputs",
            "outputs",
            "env",
            "path",
            "from",
            "sbatch_extra",
            "partition",
            "time_limit",
            "container",
            "image",
            "retries",
            "update",
            "marker",
            "hash",
        ]
    ),
    st.text(max_size=8),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=6)
    ),
    max_leaves=30,
)


@example("'\n")  # an unclosed quote at the end: the mark is past the last line
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=YAML_ALPHABET, max_size=200))
def test_random_text_parses_or_reports(text: str) -> None:
    parsed, issues = parse_documents(text, "f.yaml")
    for issue in issues:
        assert issue.file == "f.yaml" and issue.message
    for document in parsed:
        validate_spec(document)  # must not raise


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, documents, max_size=8).map(lambda d: {"kind": "Run", **d}))
@example({"kind": "Run", "[key]": None})  # found: pydantic's key marker as a field's name
def test_random_documents_validate_or_report(data: dict[str, object]) -> None:
    from reconciler.desired.yamlsource import SourceDocument

    spec, issues = validate_spec(SourceDocument("f.yaml", 0, 1, data, {}))
    assert (spec is None) == bool(issues)
    for issue in issues:
        assert issue.file == "f.yaml" and issue.line == 1


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(documents, min_size=1, max_size=3))
def test_random_files_through_the_whole_loader(tmp_path: Path, docs: list[object]) -> None:
    root = tmp_path / "fuzz"
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "recon.yaml").write_text("project: fuzz\n")
    yaml = YAML(typ="safe", pure=True)
    with (root / "specs" / "a.yaml").open("w") as stream:
        try:
            yaml.dump_all(docs, stream)
        except Exception:
            return  # hypothesis built something YAML can't write (e.g. NaN keys): not ours
    try:
        load_desired(WorktreeSource(root), cache_dir=tmp_path / "cache")
    except SpecError as error:
        assert error.issues
