"""The over-long prompt policy: filter, truncate left/right, or refuse."""

import pytest

from relay.data import DatasetError
from relay.data.prompt_source import fit_prompt


def test_short_prompt_is_kept_whole() -> None:
    assert fit_prompt([1, 2, 3], 3, filter_overlong=True, truncation="error") == [1, 2, 3]


def test_filter_drops_and_truncation_cuts() -> None:
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=True, truncation="error") is None
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="left") == [2, 3, 4]
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="right") == [1, 2, 3]


def test_error_names_the_keys() -> None:
    with pytest.raises(DatasetError, match=r"4 tokens > data.max_prompt_length=3 and data.truncation=error"):
        fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="error")
