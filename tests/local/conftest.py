"""The example project the docs' stories run on (see tests/docs.py)."""

from tests.docs import example as example
