"""What the step's responses earned and looked like: ``reward/*``, ``filter/*``, ``response/*``, ``rollout/*``,
``agent/*``, ``curriculum/*``, ``data/*``, ``sft/*``."""

from relay.metrics.catalog import declare

# reward/*: over every response sampled this step (with the group filter: over every pass's samples)
REWARD_MEAN = declare("reward/mean", "score", "mean reward of the step's sampled responses", "reward")
REWARD_STD = declare("reward/std", "score", "standard deviation of the trained responses' rewards", "driver")
REWARD_ACCURACY = declare(
    "reward/accuracy", "share", "sampled responses whose answer is right (strict: where the prompt asked)", "reward"
)
REWARD_TRAINED_MEAN = declare(
    "reward/trained_mean", "score", "mean reward of the responses the group filter kept for the update", "driver"
)
REWARD_TRAINED_ACCURACY = declare(
    "reward/trained_accuracy",
    "share",
    "responses the update trained on whose answer is right, strictly (training samples, not held out)",
    "driver",
)
REWARD_FORMAT_RATE = declare("reward/format_rate", "share", "responses with an answer the grader can find", "reward")
REWARD_FORMAT_FAILURE_RATE = declare("reward/format_failure_rate", "share", "1 - reward/format_rate", "reward")
REWARD_ERRORS = declare("reward/errors", "count", "responses whose grading raised (scored 0)", "reward")
REWARD_TIMEOUTS = declare(
    "reward/timeouts", "count", "responses whose grading overran reward.item_timeout_s or reward.timeout_s", "reward"
)
REWARD_BLOCKED_COUNT = declare("reward/blocked_count", "count", "responses zeroed by reward.blocklist", "reward")
REWARD_BLOCKED_RATE = declare("reward/blocked_rate", "share", "share of responses zeroed by the blocklist", "reward")
REWARD_OVERLONG_PENALTY = declare(
    "reward/overlong_penalty_mean", "score", "mean soft overlong penalty (reward.overlong_buffer)", "reward"
)
REWARD_OVERLONG_FRAC = declare("reward/overlong_frac", "share", "responses inside the overlong buffer", "reward")
REWARD_OVERLONG_FULL_FRAC = declare(
    "reward/overlong_full_frac", "share", "responses at the length limit (the full penalty)", "reward"
)
REWARD_KL_COEF = declare(
    "reward/kl_coef", "score", "the KL-in-reward coefficient this batch was penalised with", "advantage"
)
REWARD_KL_PENALTY_MEAN = declare(
    "reward/kl_penalty_mean", "score", "mean KL penalty subtracted from the rewards", "advantage"
)
REWARD_KL_PER_TOKEN = declare("reward/kl_per_token", "nats", "the batch's per-token KL to the reference", "advantage")
REWARD_PENALIZED_MEAN = declare("reward/penalized_mean", "score", "mean reward after the KL penalty", "advantage")
REWARD_SOLVER_ACCURACY = declare(
    "reward/solver_accuracy", "share", "solver answers that were right (reward.mode=solver)", "reward"
)
REWARD_SOLVER_ENGINE_CALLS = declare("reward/solver_engine_calls", "count", "calls to the solver engine", "reward")
REWARD_SOLVER_GUIDELINES_CUT = declare(
    "reward/solver_guidelines_cut", "count", "guidelines cut to fit reward.solver_max_prompt_length", "reward"
)
REWARD_SOLVER_PROMPT_TOKENS = declare(
    "reward/solver_prompt_tokens_mean", "tokens", "mean solver prompt length", "reward"
)
REWARD_SOLVER_PROMPTS_CUT = declare("reward/solver_prompts_cut", "count", "solver prompts cut at the limit", "reward")
REWARD_SOLVER_RESPONSE_LENGTH = declare(
    "reward/solver_response_length_mean", "tokens", "mean solver answer length", "reward"
)
REWARD_SOLVER_TRUNCATED = declare(
    "reward/solver_truncated_frac", "share", "solver answers cut at reward.solver_max_new_tokens", "reward"
)

FILTER_EXTRA_PASSES = declare("filter/extra_passes", "count", "extra rollout passes the group filter sampled", "driver")
FILTER_EXTRA_ROLLOUT_SECONDS = declare("filter/extra_rollout_seconds", "s", "seconds of those extra passes", "driver")
FILTER_GROUPS_KEPT = declare("filter/groups_kept", "count", "groups with reward variance kept for the update", "driver")
FILTER_GROUPS_DROPPED = declare("filter/groups_dropped", "count", "groups dropped for equal rewards", "driver")
FILTER_GROUPS_FILLED = declare(
    "filter/groups_filled", "count", "constant groups kept to fill the batch when the passes ran out", "driver"
)
FILTER_GROUPS_SURPLUS = declare("filter/groups_surplus", "count", "groups with signal beyond the batch size", "driver")
FILTER_PROMPTS_SAMPLED = declare("filter/prompts_sampled", "count", "prompts sampled over every pass", "driver")
FILTER_SAMPLED_ACCURACY = declare(
    "filter/sampled_accuracy",
    "share",
    "every pass's samples whose answer is right, strictly (training samples, not held out)",
    "driver",
)
FILTER_SAMPLED_REWARD_MEAN = declare("filter/sampled_reward_mean", "score", "mean reward over every pass", "driver")

RESPONSE_LENGTH_MEAN = declare("response/length_mean", "tokens", "mean model-written tokens per response", "driver")
RESPONSE_LENGTH_MAX = declare("response/length_max", "tokens", "the longest response's model-written tokens", "driver")
ROLLOUT_TRUNCATED_FRAC = declare(
    "rollout/truncated_frac", "share", "responses cut at data.max_response_length", "rollout"
)

AGENT_TURNS_MEAN = declare("agent/turns_mean", "count", "mean model turns per multi-turn response", "rollout")
AGENT_TOOL_CALLS = declare("agent/tool_calls_count", "count", "tool calls this step", "rollout")
AGENT_TOOL_CALLS_PER_RESPONSE = declare(
    "agent/tool_calls_per_response", "count", "mean tool calls per response", "rollout"
)
AGENT_TOOL_ERRORS = declare("agent/tool_errors_count", "count", "tool calls that returned an error", "rollout")
AGENT_TOOL_TIMEOUTS = declare("agent/tool_timeouts_count", "count", "tool calls that timed out", "rollout")
AGENT_TOOL_LATENCY_P50 = declare("agent/tool_latency_p50_s", "s", "median tool call latency", "tools")
AGENT_TOOL_LATENCY_P95 = declare("agent/tool_latency_p95_s", "s", "95th percentile tool call latency", "tools")
AGENT_TOOL_TOKENS_MEAN = declare(
    "agent/tool_tokens_mean", "tokens", "mean tool-result tokens per response (attended, not trained)", "rollout"
)
AGENT_TURN_LIMIT_FRAC = declare(
    "agent/turn_limit_frac", "share", "responses that reached rollout.agent.max_turns", "rollout"
)
AGENT_CORRECT_WITH_TOOL = declare(
    "agent/correct_with_tool_share", "share", "right answers that called a tool", "driver"
)

CURRICULUM_LEVEL = declare("curriculum/level", "index", "the level the step trained on (0: the easiest)", "driver")
CURRICULUM_WINDOW_ACCURACY = declare(
    "curriculum/window_accuracy",
    "share",
    "mean of reward/accuracy (strict, training samples) over the promotion window",
    "driver",
)
CURRICULUM_PROMOTED = declare("curriculum/promoted", "index", "1 when the next level starts next step", "driver")
DATA_EPOCHS_DONE = declare("data/epochs_done", "count", "complete passes over the training prompts", "driver")
SFT_TRAINED_TOKENS = declare("sft/trained_tokens", "tokens", "response tokens a warm-start step trained on", "driver")
