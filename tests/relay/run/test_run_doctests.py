"""The examples in relay.run's docstrings are true."""

from __future__ import annotations

import doctest

import pytest

from relay.run import digest, jsonsafe, logs, manifest, summarize


@pytest.mark.parametrize("module", [digest, jsonsafe, logs, manifest, summarize], ids=lambda m: m.__name__)
def test_docstring_examples(module) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
