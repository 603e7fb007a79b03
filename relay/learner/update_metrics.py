"""What an update's optimizer steps leave behind, and the metrics the update reports from it.

Each mini-batch step of :meth:`relay.learner.learner.JaxLearner.update` hands a :class:`StepOutcome` (its
metric sums, gradient norm, learning rate and whether it was skipped) to the update's :class:`UpdateTally`,
which also counts the first epoch's token positions (computed, real, in the padded layout) and keeps its
log-probs. The functions below turn the tally into the update's ``actor/*``, ``batch/*`` and ``logprob_gap/*``
metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from relay.metrics import policy as pm
from relay.packing import RowLayout

# The batch's log-probs compared with the learner's: metric name -> batch field (padded [N, R]).
GAP_SOURCES = (("rollout", "rollout_log_probs"), ("actor", "old_log_probs"))


@dataclass(frozen=True)
class StepOutcome:
    """One optimizer step's results on the host: metric sums, gradient norm, learning rate, skipped or applied."""

    sums: dict[str, float]
    grad_norm: float
    lr: float
    skipped: bool


@dataclass
class UpdateTally:
    """An update's optimizer steps so far: the applied steps' sums and gradient norms, the last step (whose values
    are reported when every step was skipped), the skips, and the first epoch's token counts and log-probs (in
    mini-batch order, so they line up with the batch's sequences)."""

    applied_sums: list[dict[str, float]] = field(default_factory=list)
    applied_norms: list[float] = field(default_factory=list)
    last: StepOutcome | None = None
    skipped_steps: int = 0
    log_probs: list[np.ndarray] = field(default_factory=list)
    computed_tokens: int = 0
    real_tokens: int = 0
    sequence_tokens: int = 0

    def add_layout(self, layout: RowLayout, log_probs: np.ndarray) -> None:
        """A first-epoch mini-batch's row layout token counts and its sequences' log-probs ``[n, R]``."""
        self.computed_tokens += layout.computed_tokens
        self.real_tokens += layout.real_tokens
        self.sequence_tokens += layout.sequence_tokens
        self.log_probs.append(log_probs)

    def add_step(self, step: StepOutcome) -> None:
        """An optimizer step: its sums and gradient norm when applied, a skip otherwise; the last step either way."""
        self.last = step
        if step.skipped:
            self.skipped_steps += 1
        else:
            self.applied_sums.append(step.sums)
            self.applied_norms.append(step.grad_norm)


def loss_metrics(tally: UpdateTally) -> dict[str, float]:
    """``actor/*``: each loss metric's and the gradient norm's mean over the applied optimizer steps (every step
    skipped: the last one's non-finite values, which show why), and the last step's learning rate."""
    reported = tally.applied_sums or [tally.last.sums]
    metrics = {pm.ACTOR_PREFIX + k: float(np.mean([s[k] for s in reported])) for k in reported[0]}
    metrics[pm.ACTOR_GRAD_NORM] = float(np.mean(tally.applied_norms)) if tally.applied_norms else tally.last.grad_norm
    metrics[pm.ACTOR_LR] = tally.last.lr
    return metrics


def padding_metrics(tally: UpdateTally, attention_mask: np.ndarray) -> dict[str, float]:
    """``batch/*``: the padding share of the token positions the trunk computed, the share the padded layout would
    have had, and the share of the sequences' tokens not computed because their group shares one prompt copy."""
    real, computed, sequence_tokens = tally.real_tokens, tally.computed_tokens, tally.sequence_tokens
    return {
        pm.BATCH_PADDING_SHARE: 1.0 - real / max(computed, 1),
        pm.BATCH_PADDING_SHARE_UNPACKED: 1.0 - sequence_tokens / max(attention_mask.size, 1),
        pm.BATCH_SHARED_PROMPT_SHARE: 1.0 - real / max(sequence_tokens, 1),
    }


def log_prob_gap_metrics(batch: Mapping[str, np.ndarray], learner_log_probs: list[np.ndarray]) -> dict[str, float]:
    """``logprob_gap/{rollout,actor}_vs_learner_{mean,max}``: the batch's rollout and actor log-probs against the
    learner's (the first epoch's, under the weights of each mini-batch's optimizer step), on response tokens."""
    mask = batch["response_mask"]
    all_log_probs = np.concatenate(learner_log_probs, axis=0)
    metrics = {}
    for name, key in GAP_SOURCES:
        if key in batch:
            gap_mean, gap_max = log_prob_gap(batch[key], all_log_probs, mask)
            metrics[pm.LOGPROB_GAP_VS_LEARNER_MEAN.format(source=name)] = gap_mean
            metrics[pm.LOGPROB_GAP_VS_LEARNER_MAX.format(source=name)] = gap_max
    return metrics


def log_prob_gap(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Mean and max of ``|a - b|`` over the tokens where ``mask`` > 0 (padding may hold anything)."""
    diff = np.where(mask > 0, np.abs(a - b), 0.0)
    return float(diff.sum() / max(mask.sum(), 1.0)), float(diff.max(initial=0.0))
