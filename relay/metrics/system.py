"""Where a step's time, memory and bytes went: ``timing/*``, ``throughput/*``, ``memory/*``, ``sync/*``, ``time/*``,
``recovery/*`` and the step index."""

# fmt: off
from relay.metrics.catalog import declare, family_prefix

STEP = declare("step", "index", "the step (0 the first); every row has it", "driver")
TIME_ELAPSED = declare("time/elapsed_s", "s", "training seconds since the first step began (the budget's clock)", "driver")

# timing/*: wall-clock seconds of the driver's phases, and each role's own compute inside them
TIMING_STEP = declare("timing/step", "s", "the whole step, prompts to synced weights", "driver")
TIMING_ROLLOUT = declare("timing/rollout", "s", "the rollout phase: generation on every replica", "driver")
TIMING_ACTOR_REF_AND_REWARD = declare("timing/actor_ref_and_reward", "s", "the phase where log-probs and grading run (side by side by default)", "driver")
TIMING_ADVANTAGE = declare("timing/advantage", "s", "the group-relative advantage on the driver", "driver")
TIMING_UPDATE = declare("timing/update", "s", "the update phase, the learner's call", "driver")
TIMING_SYNC = declare("timing/sync", "s", "loading the new weights into the rollout and actor copies", "driver")
TIMING_COLLECT = declare("timing/collect", "s", "a pipelined step's collection of the next batch", "driver")
TIMING_ROLLOUT_WAIT = declare("timing/rollout_wait", "s", "a pipelined step's wait for its collected batch", "driver")
TIMING_LOG_PROBS_OF_KEPT = declare("timing/log_probs_of_kept", "s", "the group filter's log-probs of the kept groups", "driver")
TIMING_REMAX_BASELINE = declare("timing/remax_baseline", "s", "ReMax's greedy baseline rollout", "driver")
TIMING_ROLE_COMPUTE = declare("timing/{role}_compute", "s", "a role's own compute inside its phase (rollout, actor_ref, reward, update)", "roles")
TIMING_VALIDATION_GENERATE_COMPUTE = declare("timing/validation_generate_compute", "s", "the rollout's generation seconds for a validation", "rollout")
TIMING_SOLVER_GENERATE = declare("timing/solver_generate", "s", "the solver engine's generation", "reward")
TIMING_SOLVER_GRADE = declare("timing/solver_grade", "s", "grading the solver's answers", "reward")
TIMING_OVERHEAD = declare("timing/driver_and_ray_overhead", "s", "the step less every role's compute, the export and the sync", "driver")
TIMING_REWARD_OVERLAP_SAVING = declare("timing/reward_overlap_saving", "s", "seconds saved by grading beside the actor_ref log-probs", "driver")
TIMING_REWARD_OVERLAP_SAVING_FRAC = declare("timing/reward_overlap_saving_frac", "share", "that saving over the two run back to back", "driver")
TIMING_REWARD_SHARE = declare("timing/reward_share_of_step", "share", "the reward role's compute over the step", "driver")

THROUGHPUT_ROLLOUT = declare("throughput/rollout_tokens_per_s", "tokens/s", "generated tokens per second", "rollout")
THROUGHPUT_LEARNER = declare("throughput/learner_tokens_per_s", "tokens/s", "sequence tokens the update processed per second, compiles left out", "learner")
THROUGHPUT_ACTOR_REF = declare("throughput/actor_ref_tokens_per_s", "tokens/s", "sequence tokens the actor_ref scored per second", "actor_ref")
THROUGHPUT_REWARD = declare("throughput/reward_items_per_s", "items/s", "responses graded per second", "reward")
THROUGHPUT_SOLVER = declare("throughput/solver_tokens_per_s", "tokens/s", "solver tokens generated per second", "reward")
THROUGHPUT_VALIDATION = declare("throughput/validation_tokens_per_s", "tokens/s", "validation tokens generated per second", "rollout")

MEMORY_PEAK_RSS = declare("memory/{role}_peak_rss_gib", "GiB", "a role's peak resident memory so far", "roles")
MEMORY_SHARED = declare("memory/{role}_shared_gib", "GiB", "a role's resident memory shared with others (the weights' memory file)", "roles")
MEMORY_ROLES_PEAK = declare("memory/roles_peak_rss_gib", "GiB", "the roles' peaks summed", "driver")

SYNC_SECONDS = declare("sync/seconds", "s", "the weights' export plus their load into every copy", "driver")
SYNC_EXPORT_SECONDS = declare("sync/export_seconds", "s", "the learner publishing the new weights", "learner")
SYNC_BYTES = declare("sync/bytes", "bytes", "bytes of weights published", "learner")
SYNC_PUBLISHED_FILES = declare("sync/published_files_gib", "GiB", "memory files of published weights not yet released", "learner")
SYNC_ROLLOUT_LOAD_SECONDS = declare("sync/rollout_load_seconds", "s", "the slowest rollout replica's load", "rollout")
SYNC_ACTOR_LOAD_SECONDS = declare("sync/actor_load_seconds", "s", "the actor copy's load", "actor_ref")
SYNC_VERSION = declare("sync/version", "index", "a pipelined step's last load before its collect: the version its samples came from", "driver")

RECOVERY_RESTARTS = declare("recovery/restarts", "count", "role actors restarted during the step", "driver")
RECOVERY_STALE_ROLLOUTS = declare("recovery/stale_rollouts", "count", "restarted rollout replicas given the current weights", "driver")
RECOVERY_RAY_RESTARTS = declare("recovery/ray_restarts", "count", "role actors Ray restarted between calls with no call failing, read from the actors' own reports (a new process incarnation) after the step", "driver")
RECOVERY_STALE_ACTOR_COPIES = declare("recovery/stale_actor_copies", "count", "restarted actor copies given the current weights", "driver")

# The families' prefixes, for code that treats a whole family alike (sums its timings, leaves its rates out)
TIME_PREFIX = family_prefix("time")
TIMING_PREFIX = family_prefix("timing")
THROUGHPUT_PREFIX = family_prefix("throughput")
MEMORY_PREFIX = family_prefix("memory")
RECOVERY_PREFIX = family_prefix("recovery")
