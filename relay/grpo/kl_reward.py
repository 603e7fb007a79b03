"""KL penalty folded into the sequence scores (verl's ``use_kl_in_reward``), run on the driver.

The alternative to the KL *loss* (relay.grpo.kl.kl_penalty inside the learner's objective): the reward
of each sequence is lowered by ``coef`` times its summed per-token KL to the reference model BEFORE the
group-relative advantage is computed, so the KL acts through the advantages and carries no gradient of
its own.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from relay.grpo.kl import kl_penalty


def kl_penalized_scores(
    scores: np.ndarray,
    log_probs: np.ndarray,
    ref_log_probs: np.ndarray,
    response_mask: np.ndarray,
    coef: float,
    kind: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Sequence scores minus ``coef`` times the sequence's summed per-token KL to the reference.

    ``kl_i = sum_t kl_t * m_t`` with ``kl_t`` the per-token estimate of kind ``kind`` (as in
    :func:`relay.grpo.kl.kl_penalty`: k1, k2, k3 / low_var_kl with the same clipping), and
    ``adjusted_i = scores_i - coef * kl_i``. This matches verl's ``apply_kl_penalty`` (which subtracts
    ``coef * kl_t`` from the token-level rewards) followed by GRPO's sum of the token rewards. ``coef`` is the
    batch's coefficient, chosen by the caller: ``algorithm.kl_coef`` with ``algorithm.kl_ctrl.type=fixed``, or the
    current value of the adaptive controller (:class:`relay.grpo.kl_controller.KLController`), which the driver
    then updates with the batch's mean per-token KL (``driver/collect.py``).

    The adjusted scores then go to the GRPO advantage (:func:`relay.grpo.advantage.grpo_outcome_advantage`),
    which normalises them within each group: only the differences of ``coef * kl_i`` between members of a
    group matter, a KL shared by the whole group cancels out, and with the std normalisation the effective
    strength of the penalty depends on the spread of the group's scores, so ``coef`` here is not
    comparable with the KL-loss coefficient.

    Worked example, ``coef = 0.1``, ``log_probs = [[-1, -2, -3], [-0.5, -1, -9]]``,
    ``ref_log_probs = [[-2, -1, -1], [-0.5, -2, 0]]``, ``response_mask = [[1, 1, 1], [1, 1, 0]]`` (the last
    token of row 1 is padding and is ignored), ``scores = [1, 0]``:

    - k1: logp - ref = [[1, -1, -2], [0, 1, .]] -> kl = [-2, 1] -> adjusted [1.2, -0.1];
    - k2: 0.5 * [[1, 1, 4], [0, 1, .]] -> kl = [3, 0.5] -> adjusted [0.7, -0.05];
    - k3: d = ref - logp = [[-1, 1, 2], [0, -1, .]], exp(d) - d - 1 =
      [[0.3679, 0.7183, 4.3891], [0, 0.3679, .]] -> kl = [5.4752, 0.3679] -> adjusted [0.45248, -0.03679].

    Args:
        scores: [B] float, one outcome reward per sequence.
        log_probs: [B, R] log-probs of the response tokens under the policy that sampled them (old policy).
        ref_log_probs: [B, R] log-probs of the same tokens under the reference model.
        response_mask: [B, R], 1 on response tokens, 0 on padding.
        coef: the batch's KL coefficient (verl's ``algorithm.kl_ctrl.kl_coef``); 0 leaves the scores unchanged.
        kind: one of ``KL_KINDS``.

    Returns:
        (adjusted scores [B] float64, summed KL per sequence [B] float64; per-token KL in float32).
    """
    scores = np.asarray(scores, dtype=np.float64)
    log_probs = np.asarray(log_probs)
    ref_log_probs = np.asarray(ref_log_probs)
    response_mask = np.asarray(response_mask)
    _check_shapes(scores, log_probs, ref_log_probs, response_mask)
    # The learner's own estimators (one definition of k1/k2/k3 and their clipping), evaluated in float32.
    per_token = np.asarray(
        kl_penalty(jnp.asarray(log_probs, jnp.float32), jnp.asarray(ref_log_probs, jnp.float32), kind)
    )
    # np.where, not a product: a padding token may hold an arbitrary (even non-finite) log-prob.
    kl_per_sequence = np.where(response_mask.astype(bool), per_token, 0.0).sum(axis=-1)
    return scores - coef * kl_per_sequence, kl_per_sequence


def _check_shapes(
    scores: np.ndarray, log_probs: np.ndarray, ref_log_probs: np.ndarray, response_mask: np.ndarray
) -> None:
    """Raise ValueError unless ``scores`` is [B] and the three others are the same [B, R]."""
    if (
        scores.ndim != 1
        or response_mask.ndim != 2
        or response_mask.shape[0] != scores.shape[0]
        or log_probs.shape != response_mask.shape
        or ref_log_probs.shape != response_mask.shape
    ):
        raise ValueError(
            f"expected scores [B], log_probs / ref_log_probs / response_mask [B, R]; got scores {scores.shape}, "
            f"log_probs {log_probs.shape}, ref_log_probs {ref_log_probs.shape}, response_mask {response_mask.shape}"
        )
