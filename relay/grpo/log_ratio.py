"""The bound on the log of a probability ratio before ``exp``, shared by every ratio in :mod:`relay.grpo`.

A ratio of two probabilities is computed as ``exp(clip(log p - log q, -MAX_LOG_RATIO, MAX_LOG_RATIO))``: in float32
``exp`` overflows to inf above ~88.7, and one token whose log-probability moved that far would turn the loss into
inf and its gradient into NaN. The bound is verl's; ``exp(20) = 4.85e8`` is far outside any clip range.

A sequence-level ratio (GSPO's, GMPO's, rollout correction's) bounds the sequence's summed or mean log-ratio, not
its tokens': clipping each token first would change the sequence's value (:mod:`relay.grpo.policy_losses`).
"""

MAX_LOG_RATIO = 20.0
