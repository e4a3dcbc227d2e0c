from __future__ import annotations

from reconciler.desired import templates


def test_tokens_are_dotted_names_in_braces_only() -> None:
    text = "cat {inputs.a.path} ${HOME} ${X.y} {a,b} awk '{print $1}' {run.dir} {{literal.x}}"
    assert [t.expression for t in templates.tokens(text)] == ["inputs.a.path", "run.dir"]


def test_unknown_tokens() -> None:
    known = templates.known_tokens(["data"], ["model"])
    text = "{inputs.data.path} {outputs.model.path} {outputs.other.path} {run.name} {run.nope}"
    assert templates.unknown_tokens(text, known) == ["outputs.other.path", "run.nope"]


def test_render_fills_tokens_and_unescapes_braces() -> None:
    text = "python x.py --in {inputs.d.path} --name {run.name} '{{not.a.token}}'"
    values = {"inputs.d.path": "/data/d.csv", "run.name": "train"}
    assert (
        templates.render(text, values)
        == "python x.py --in /data/d.csv --name train '{not.a.token}'"
    )
