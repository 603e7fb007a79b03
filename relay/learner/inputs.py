"""The fields of a training batch the learner reads: one list, for the driver that sends them and the learner."""

# The padded batch's fields every update reads.
TRAIN_KEYS = ("input_ids", "attention_mask", "position_ids", "response_mask", "advantages")
# The per-token log-probs the loss may read; which ones, the loss settings say (relay.learner.row_batches.loss_inputs).
LOG_PROB_KEYS = ("ref_log_probs", "old_log_probs", "rollout_log_probs")
# Every field of a training batch the learner may read: what the driver sends it.
LEARNER_INPUTS = TRAIN_KEYS + LOG_PROB_KEYS
