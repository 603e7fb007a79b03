"""``reward.overlong_buffer``: DAPO's soft overlong punishment, a penalty that grows with the response length
inside the last ``length`` tokens of the budget (DAPO, arXiv 2503.14476, eq. 13).

A response that fills the budget was cut off (or was about to be); without a penalty a loop of
"The answer is 5. The answer is 5. ..." that contains an answer marker earns the format score, and the
policy learns nothing about stopping. Greedy decoding, where such loops are worst, is what a held-out
evaluation reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relay.metrics import outcomes as om


def overlong_penalty(
    lengths: Sequence[int] | np.ndarray, max_length: int, buffer_length: int, penalty_factor: float
) -> np.ndarray:
    """``[B]`` float32 penalties (<= 0) for responses of ``lengths`` tokens with a budget of ``max_length``.

    With ``expected = max_length - buffer_length``: 0 up to ``expected`` tokens, then
    ``-(length - expected) / buffer_length * penalty_factor`` up to ``max_length``, and ``-penalty_factor``
    beyond it (a length over the budget can only come from a caller that did not truncate).

    Worked example: ``max_length=128``, ``buffer_length=32``, ``penalty_factor=1``; lengths
    ``[50, 96, 112, 128, 140]`` -> ``[0, 0, -0.5, -1, -1]`` (112 is 16 of the buffer's 32 tokens in).
    """
    if buffer_length <= 0 or buffer_length > max_length:
        raise ValueError(
            f"reward.overlong_buffer.length={buffer_length}: must be in [1, data.max_response_length={max_length}]"
        )
    if penalty_factor < 0:
        raise ValueError(f"reward.overlong_buffer.penalty_factor={penalty_factor}: must be >= 0 (it is subtracted)")
    lengths = np.asarray(lengths, np.float64)
    expected = max_length - buffer_length
    over = np.clip(lengths - expected, 0.0, buffer_length)
    return (-over / buffer_length * penalty_factor).astype(np.float32)


def apply_overlong_penalty(
    scores: np.ndarray, lengths: Sequence[int] | np.ndarray, max_length: int, buffer_length: int, penalty_factor: float
) -> tuple[np.ndarray, dict[str, float]]:
    """``scores`` plus :func:`overlong_penalty` (a new float32 array; ``acc`` is not touched: a long correct
    answer is still correct) and the metrics ``reward/overlong_penalty_mean`` (mean penalty over the batch,
    <= 0), ``reward/overlong_frac`` (share of responses inside the buffer or past it) and
    ``reward/overlong_full_frac`` (share that reached ``max_length``: truncated).

    Worked example: scores ``[1, 0.1, 0.1]``, lengths ``[40, 112, 128]``, budget 128, buffer 32, factor 1
    -> scores ``[1, -0.4, -0.9]``, penalty mean -0.5, overlong share 2/3, full share 1/3.
    """
    scores = np.asarray(scores, np.float32)
    lengths = np.asarray(lengths)
    if scores.shape != lengths.shape or scores.ndim != 1:
        raise ValueError(f"expected scores and lengths of the same shape [B]; got {scores.shape} and {lengths.shape}")
    penalty = overlong_penalty(lengths, max_length, buffer_length, penalty_factor)
    n = max(len(scores), 1)
    metrics = {
        om.REWARD_OVERLONG_PENALTY: float(penalty.sum() / n),
        om.REWARD_OVERLONG_FRAC: float((lengths > max_length - buffer_length).sum() / n),
        om.REWARD_OVERLONG_FULL_FRAC: float((lengths >= max_length).sum() / n),
    }
    return (scores + penalty).astype(np.float32), metrics
