"""The tag recon writes into every job: its format, and reading it back from any comment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from reconciler.scheduler.tag import Tag

NAMES = st.from_regex(r"\A[A-Za-z0-9_-]{1,40}\Z")
HASHES = st.from_regex(r"\A[0-9a-f]{16}\Z")
TAGS = st.builds(
    Tag,
    project=NAMES,
    deployment=st.from_regex(r"\A[0-9a-f]{12}\Z"),
    kind=st.sampled_from(["run", "alloc"]),
    name=NAMES,
    spec_hash=HASHES,
)

TRAIN = Tag(
    project="demo",
    deployment="0123456789ab",
    kind="run",
    name="train-2",
    spec_hash="0123456789abcdef",
)


def test_format_and_job_name() -> None:
    assert TRAIN.format() == "recon2:demo:0123456789ab:run:train-2:0123456789abcdef"
    assert TRAIN.job_name == "demo.train-2"


def test_parse_reads_a_literal_comment() -> None:
    assert Tag.parse("recon2:demo:0123456789ab:alloc:ws_1:fedcba9876543210") == Tag(
        project="demo",
        deployment="0123456789ab",
        kind="alloc",
        name="ws_1",
        spec_hash="fedcba9876543210",
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "(null)",
        "probe-held",
        "recon2:demo:0123456789ab:run:train:0123456789abcde",  # hash one short
        "recon2:demo:0123456789ab:run:train:0123456789ABCDEF",  # upper-case hash
        "recon2:demo:0123456789ab:job:train:0123456789abcdef",  # unknown kind
        "recon2:demo:run:train:0123456789abcdef",  # no deployment
        "recon1:demo:run:train:0123456789abcdef",  # the format before deployments
        "recon2:de mo:0123456789ab:run:train:0123456789abcdef",
        "recon2:demo:0123456789AB:run:train:0123456789abcdef",  # upper-case deployment
        "recon2:demo:0123456789ab:run:train:0123456789abcdef:extra",
        "xrecon2:demo:0123456789ab:run:train:0123456789abcdef",
        "recon2:demo:0123456789ab:run:a.b:0123456789abcdef",
    ],
)
def test_parse_returns_none_for_comments_recon_did_not_write(text: str) -> None:
    assert Tag.parse(text) is None


@given(TAGS)
def test_round_trip(tag: Tag) -> None:
    text = tag.format()
    assert Tag.parse(text) == tag
    # Safe in an #SBATCH line, in argv and in --parsable2 output.
    assert all(ch.isascii() and (ch.isalnum() or ch in "_-:") for ch in text)
    assert all(ch.isascii() and (ch.isalnum() or ch in "_-.") for ch in tag.job_name)


@given(st.text())
def test_parse_never_raises_on_junk(text: str) -> None:
    parsed = Tag.parse(text)
    assert parsed is None or parsed.format() == text.strip()


@pytest.mark.parametrize(
    "fields",
    [
        {"project": "a|b"},
        {"project": ""},
        {"name": "x:y"},
        {"name": "x.y"},
        {"spec_hash": "0123"},
        {"kind": "job"},
    ],
)
def test_a_tag_cannot_hold_a_separator_or_a_bad_hash(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Tag.model_validate({**TRAIN.model_dump(), **fields})
