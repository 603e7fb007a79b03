"""The learner's and the advantage's metrics: ``actor/*``, ``advantage/*``, ``logprob_gap/*``, ``offpolicy/*``,
``learner/*``, ``batch/*``, ``remax/*``."""

# fmt: off
from relay.metrics.catalog import declare, family_prefix

# actor/*: means over the update's applied optimizer steps (every epoch and mini-batch); relay/learner/update_metrics.py
ACTOR_LOSS = declare("actor/loss", "score", "the loss the optimizer minimised (policy loss + KL and entropy terms)", "learner")
ACTOR_PG_LOSS = declare("actor/pg_loss", "score", "the policy-gradient term of the loss", "learner")
ACTOR_KL = declare("actor/kl", "nats", "token-mean KL of the policy to the reference (algorithm.kl_loss_type)", "learner")
ACTOR_ENTROPY = declare("actor/entropy", "nats", "token-mean entropy of the policy's next-token distribution", "learner")
ACTOR_PG_CLIPFRAC = declare("actor/pg_clipfrac", "share", "response tokens whose gradient the clip removed (cispo: whose weight it clipped)", "learner")
ACTOR_PG_CLIPFRAC_LOWER = declare("actor/pg_clipfrac_lower", "share", "response tokens the dual clip's lower bound caught (negative advantages)", "learner")
ACTOR_PPO_KL = declare("actor/ppo_kl", "nats", "token-mean KL of the updated policy to the old policy", "learner")
ACTOR_PG_COV_SELECTED = declare("actor/pg_cov_selected", "share", "tokens clip_cov/kl_cov singled out by their advantage-log-prob covariance", "learner")
ACTOR_NLL = declare("actor/nll", "nats", "the supervised warm start's token-mean negative log-likelihood", "learner")
ACTOR_GRAD_NORM = declare("actor/grad_norm", "score", "global gradient norm before clipping", "learner")
ACTOR_LR = declare("actor/lr", "score", "the learning rate of the update's last optimizer step", "learner")
ACTOR_OPTIMIZER_STEPS = declare("actor/optimizer_steps", "count", "optimizer steps applied since the run began", "learner")
ACTOR_ROLLOUT_IS_WEIGHT = declare("actor/rollout_is_weight", "score", "mean rollout-correction importance weight (algorithm.rollout_correction)", "learner")
ACTOR_ROLLOUT_TOKEN_MASKED = declare("actor/rollout_token_masked", "share", "response tokens whose ratio to the rollout fell outside algorithm.rollout_token_mask (no loss)", "learner")
ACTOR_ROLLOUT_SEQ_REJECTED = declare("actor/rollout_seq_rejected", "share", "sequences whose ratio to the rollout fell outside algorithm.rollout_seq_reject (no loss)", "learner")

ADVANTAGE_ABS_MEAN = declare("advantage/abs_mean", "score", "mean |advantage| of the trained responses", "advantage")
ADVANTAGE_ZERO_GROUPS = declare("advantage/zero_groups_frac", "share", "prompt groups whose samples all scored the same (no signal)", "advantage")
REMAX_BASELINE_MEAN = declare("remax/baseline_mean", "score", "mean reward of ReMax's greedy baselines", "advantage")

LOGPROB_GAP_VS_LEARNER_MEAN = declare("logprob_gap/{source}_vs_learner_mean", "nats", "token-mean |log-prob| difference of the batch's rollout (or actor copy) log-probs and the learner's", "learner")
LOGPROB_GAP_VS_LEARNER_MAX = declare("logprob_gap/{source}_vs_learner_max", "nats", "largest such difference over the batch's response tokens", "learner")
# the rollout's gap to the learner, which the step table, the gauges and the staleness figures read
LOGPROB_GAP_ROLLOUT_MEAN = LOGPROB_GAP_VS_LEARNER_MEAN.format(source="rollout")
LOGPROB_GAP_ROLLOUT_MAX = LOGPROB_GAP_VS_LEARNER_MAX.format(source="rollout")
LOGPROB_GAP_ROLLOUT_VS_ACTOR_MEAN = declare("logprob_gap/rollout_vs_actor_mean", "nats", "token-mean |actor copy - rollout| log-prob difference", "actor_ref")
LOGPROB_GAP_ROLLOUT_VS_ACTOR_MAX = declare("logprob_gap/rollout_vs_actor_max", "nats", "largest |actor copy - rollout| log-prob difference", "actor_ref")

OFFPOLICY_WEIGHTS_VERSION = declare("offpolicy/weights_version", "index", "the weights version the step's samples were drawn with", "rollout")
OFFPOLICY_STALENESS_MEAN = declare("offpolicy/staleness_mean", "steps", "mean updates between a sample's weights and the ones it trains", "driver")
OFFPOLICY_STALENESS_MAX = declare("offpolicy/staleness_max", "steps", "the step's largest staleness", "driver")
OFFPOLICY_IS_WEIGHT_MEAN = declare("offpolicy/is_weight_mean", "score", "mean importance weight correcting stale samples", "learner")
OFFPOLICY_GAP_AT_STALENESS = declare("offpolicy/logprob_gap_mean_staleness_{staleness}", "nats", "the rollout-vs-learner gap of a step, under the step's largest staleness", "driver")

LEARNER_COMPILE_SECONDS = declare("learner/compile_seconds", "s", "seconds the update spent compiling (XLA)", "learner")
LEARNER_COMPILES = declare("learner/compiles_count", "count", "update programs this learner process compiled (a resumed run counts again)", "learner", machine=True)
LEARNER_SKIPPED_STEPS = declare("learner/skipped_steps", "count", "optimizer steps of this update skipped for a non-finite loss or gradient", "learner")
LEARNER_SKIPPED_TOTAL = declare("learner/skipped_total", "count", "optimizer steps skipped since the run began", "learner")
LEARNER_CONSECUTIVE_SKIPS = declare("learner/consecutive_skips", "count", "skipped optimizer steps in a row (train.max_consecutive_skips stops)", "learner")
LEARNER_REF_FORWARD = declare("learner/ref_forward", "index", "1 when the learner computed the reference log-probs itself, else 0", "learner")
ACTOR_REF_REF_FORWARD = declare("actor_ref/ref_forward", "index", "1 when the actor_ref role computed the reference log-probs, else 0", "actor_ref")

BATCH_SEQUENCES = declare("batch/sequences", "count", "sequences (prompt x sample) the update trained on", "driver")
BATCH_PROMPT_WIDTH = declare("batch/prompt_width", "tokens", "the padded prompt width of the trained batch", "driver")
BATCH_RESPONSE_WIDTH = declare("batch/response_width", "tokens", "the padded response width of the batch", "driver")
BATCH_PADDING_SHARE = declare("batch/padding_share", "share", "padding among the token positions the learner computed", "learner")
BATCH_PADDING_SHARE_UNPACKED = declare("batch/padding_share_unpacked", "share", "the padding share the padded layout would have had", "learner")
BATCH_SHARED_PROMPT_SHARE = declare("batch/shared_prompt_share", "share", "sequence tokens not computed because a group shares one prompt copy", "learner")
BATCH_PADDING_SHARE_ACTOR_REF = declare("batch/padding_share_actor_ref", "share", "padding among the actor_ref's computed token positions", "actor_ref")
BATCH_SHARED_PROMPT_SHARE_ACTOR_REF = declare("batch/shared_prompt_share_actor_ref", "share", "the actor_ref's tokens saved by shared prompt copies", "actor_ref")

ACTOR_PREFIX = family_prefix("actor")  # the update's loss figures: ACTOR_PREFIX + the objective's name (loss, kl, ...)
