"""``reward.function``: loading, calling, and the one-example check the driver runs before Ray starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relay.scoring.user_function import (
    RewardFunctionError,
    call_reward_function,
    check_reward_function,
    example_batch,
    load_reward_function,
)

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def _encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_check_scores_the_example_with_kwargs() -> None:
    assert check_reward_function("reward_fns:exact", {"bonus": 0.5}, "What is 2+3?", "5", _encode) == 1.5


def test_example_batch_has_what_the_reward_role_sends() -> None:
    batch = example_batch("Q?", "7", [5, 6, 7])
    assert set(batch.non_tensor) == {"response_text", "question", "ground_truth", "uid"}
    assert set(batch.batch) == {"responses", "response_mask", "response_length"}
    np.testing.assert_array_equal(batch.batch["responses"], [[5, 6, 7]])
    assert batch.batch["response_length"].tolist() == [3]
    assert check_reward_function("reward_fns:token_count", {}, "Q?", "7", lambda t: [0] * 11) == 11.0


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("reward_fns", {}, r"expected 'package.module:callable'"),
        ("no_such_module_xyz:f", {}, r"cannot import 'no_such_module_xyz'"),
        ("reward_fns:missing", {}, r"has no callable 'missing'"),
        ("reward_fns:NOT_CALLABLE", {}, r"has no callable 'NOT_CALLABLE'"),
        ("reward_fns:raises", {}, r"raised KeyError: 'answer' when called on one example"),
        ("reward_fns:too_few", {}, r"failed on one example: .*returned 0 results for 1 rows"),
        ("reward_fns:not_numbers", {}, r"result 0 is 'yes', not a number"),
        ("reward_fns:a_dict", {}, r"returned dict; return a list"),
        ("reward_fns:needs_kwarg", {}, r"raised TypeError: .*scale.*reward.function_kwargs=\{\}"),
    ],
)
def test_check_names_the_spec_and_the_problem(spec: str, kwargs: dict, message: str) -> None:
    with pytest.raises(RewardFunctionError, match=message) as info:
        check_reward_function(spec, kwargs, "What is 2+3?", "5", _encode)
    assert "reward.function=" in str(info.value) or "reward function" in str(info.value)


def test_non_finite_score_is_refused() -> None:
    fn = load_reward_function("reward_fns:needs_kwarg")
    with pytest.raises(RewardFunctionError, match="non-finite"):
        call_reward_function(fn, example_batch("Q?", "1", [1]), {"scale": float("nan")})
