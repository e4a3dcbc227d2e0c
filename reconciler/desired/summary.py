"""What project-wide checks and the graph need of one valid document, as plain data.

A sweep has thousands of documents and most commits change a few. The parse cache keeps
a summary per document (plain tuples, quick to store and load) and the raw document;
models are rebuilt from the raw data only for the runs someone actually looks at.
"""

from __future__ import annotations

import marshal
import posixpath
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from reconciler.desired.documents import ParsedDocument
from reconciler.desired.models import HashKind, Run


class InputRef(NamedTuple):
    name: str
    run: str | None  # the upstream run, for `from: run.output`
    output: str | None
    line: int


class DocumentSummary(NamedTuple):
    kind: str
    name: str
    file: str
    line: int
    name_line: int
    spec_hash: str | None  # None until a `script:` file's content joins it
    script: str | None
    script_line: int
    inputs: tuple[InputRef, ...]
    outputs: tuple[str, ...]
    data: Mapping[str, Any]  # the document as written, to rebuild its model on demand
    coupled_with: tuple[str, ...] = ()
    coupled_line: int = 0
    allocation: str | None = None  # the Allocation a run runs in
    allocation_line: int = 0
    workdir: str | None = None  # as written; None: the default under runs_dir
    output_paths: tuple[tuple[str, int], ...] = ()  # each output's path as written, its line
    # What a pass reads of every run, so a current run's model need not be built: each
    # output's name, path, marker and hash kind; each `path:` input's name and path.
    outputs_declared: tuple[tuple[str, str, str | None, HashKind], ...] = ()
    external_inputs: tuple[tuple[str, str], ...] = ()
    # The files its own `environment:` declares, and their line.
    environment_files: tuple[str, ...] = ()
    environment_line: int = 0
    # The run's code as written (``code_files``): the words of its command that may be a
    # path (those that name a committed file are its code) and its `code:` globs; both
    # empty with `code: none`.
    code_words: tuple[str, ...] = ()
    code_globs: tuple[str, ...] = ()
    code_line: int = 0
    renamed_from: str | None = None  # the run's name before a rename
    renamed_line: int = 0

    @property
    def upstreams(self) -> list[str]:
        return [ref.run for ref in self.inputs if ref.run is not None]

    def to_plain(self) -> tuple[Any, ...]:
        """Exact tuples only: what `marshal` stores. The raw document goes in as its own
        marshalled bytes, unpacked only if its model is ever built."""
        inputs = tuple(tuple(ref) for ref in self.inputs)
        data = self.data
        packed = data.packed if isinstance(data, _Packed) else marshal.dumps(dict(data))
        return (*self[:8], inputs, self.outputs, packed, *self[11:])

    @classmethod
    def from_plain(cls, plain: tuple[Any, ...]) -> DocumentSummary:
        return cls._make(
            (*plain[:8], _input_refs(plain[8]), plain[9], _Packed(plain[10]), *plain[11:])
        )


@lru_cache(maxsize=4096)
def _input_refs(plain: tuple[tuple[Any, ...], ...]) -> tuple[InputRef, ...]:
    """Inputs from their cached form, made once per distinct form: a sweep's thousands
    of documents mostly read the same inputs on the same lines."""
    return tuple(map(InputRef._make, plain))


class _Packed(Mapping[str, Any]):
    """A cached raw document, unmarshalled on first use: most are never looked at."""

    def __init__(self, packed: bytes) -> None:
        self.packed = packed
        self._data: dict[str, Any] | None = None

    def _unpacked(self) -> dict[str, Any]:
        if self._data is None:
            self._data = marshal.loads(self.packed)
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._unpacked()[key]

    def get(self, key: str, default: Any = None) -> Any:
        # `_may_hold` written out: expanding sweeps asks each of 10,000 documents.
        if self._data is None and key.encode("utf-8", "surrogatepass") not in self.packed:
            return default
        return self._unpacked().get(key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._may_hold(key) and key in self._unpacked()

    def _may_hold(self, key: str) -> bool:
        """False when the document has no such key, told without unpacking it: marshal
        writes each string's UTF-8 bytes in full where it first occurs (later uses may
        refer back to it), so a key the bytes do not hold is not there. Expanding sweeps
        asks every document for its `matrix`, which most do not have."""
        return self._data is not None or key.encode("utf-8", "surrogatepass") in self.packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._unpacked())

    def __len__(self) -> int:
        return len(self._unpacked())

    def fresh(self) -> dict[str, Any]:
        """The document as a new dict, not kept: a model built from it holds what it
        needs, and 10,000 raw documents kept beside their models cost 20 MiB."""
        return dict(self._data) if self._data is not None else marshal.loads(self.packed)


def raw_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """A summary's raw document as a dict of its own, to build the model from."""
    return data.fresh() if isinstance(data, _Packed) else dict(data)


def _split(upstream: tuple[str, str] | None) -> tuple[str | None, str | None]:
    return upstream if upstream is not None else (None, None)


# A word of a command that may name a file: what lies between blanks, quotes, shell
# operators, `=` (`--config=conf/model.yaml`) and template tokens' braces.
_WORD = re.compile(r"[^\s'\"`;|&()<>{}=$\\]+")


def command_words(command: str | None) -> tuple[str, ...]:
    """The words of a command that could be paths inside the project, normalized
    (`./run.sh` is `run.sh`), each once: the loader keeps those that are committed files.
    An absolute path, one leaving the project (`..`) or one built from a template token
    (`conf/{matrix.model}.yaml`) names no file of the commit."""
    if command is None:
        return ()
    words: dict[str, None] = {}
    for word in _WORD.findall(command):
        if word.startswith(("/", "-")):
            continue  # an absolute path, or an option
        path = posixpath.normpath(word)
        if path != ".." and not path.startswith("../"):
            words[path] = None
    return tuple(words)


def summarize(document: ParsedDocument, spec_hash: str | None) -> DocumentSummary:
    spec = document.spec
    inputs: tuple[InputRef, ...] = ()
    outputs: tuple[str, ...] = ()
    script, script_line = None, 0
    coupled: tuple[str, ...] = ()
    allocation = None
    workdir: str | None = None
    output_paths: tuple[tuple[str, int], ...] = ()
    outputs_declared: tuple[tuple[str, str, str | None, HashKind], ...] = ()
    external_inputs: tuple[tuple[str, str], ...] = ()
    environment_files: tuple[str, ...] = ()
    code_words: tuple[str, ...] = ()
    code_globs: tuple[str, ...] = ()
    renamed_from = spec.renamed_from
    if isinstance(spec, Run):
        if spec.environment is not None:
            environment_files = spec.environment.files
        if spec.code != "none":
            code_words = command_words(spec.command)
            code_globs = spec.code or ()
        coupled = spec.coupled_with
        allocation = spec.allocation
        inputs = tuple(
            InputRef(name, *_split(item.upstream), document.line_of("inputs", name))
            for name, item in spec.inputs.items()
        )
        outputs = tuple(spec.outputs)
        script, script_line = spec.script, document.line_of("script")
        workdir = spec.workdir
        output_paths = tuple(
            (output.path, document.line_of("outputs", name))
            for name, output in spec.outputs.items()
        )
        outputs_declared = tuple(
            (name, output.path, output.marker, output.hash) for name, output in spec.outputs.items()
        )
        external_inputs = tuple(
            (name, item.path) for name, item in spec.inputs.items() if item.path is not None
        )
    return DocumentSummary(
        spec.kind,
        spec.name,
        document.file,
        document.line,
        document.line_of("name"),
        spec_hash,
        script,
        script_line,
        inputs,
        outputs,
        document.data,
        coupled,
        document.line_of("coupled_with"),
        allocation,
        document.line_of("allocation"),
        workdir,
        output_paths,
        outputs_declared,
        external_inputs,
        environment_files,
        document.line_of("environment", "files"),
        code_words,
        code_globs,
        document.line_of("code"),
        renamed_from,
        document.line_of("renamed_from"),
    )
