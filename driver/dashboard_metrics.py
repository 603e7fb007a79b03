"""Per-step metrics published through ``ray.util.metrics``: they reach every node's Prometheus endpoint
(``ray start --metrics-export-port``) as ``ray_relay_*`` series tagged ``run=<run name>``, which the Ray
dashboard's Metrics page (with Prometheus and Grafana set up: docs/monitoring.md) and
``docs/grafana/relay_dashboard.json`` read.

Ray exports a gauge's value for a short window after it is set and then drops it; steps take from seconds to
minutes, so a scrape between two steps would find nothing. :class:`StepGauges` keeps each metric's last value
and sets it again every ``refresh_s`` (half of Ray's report interval) until the next step or :meth:`close`.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.metrics import validation as vm

# step metric key -> (Ray metric name, description)
PUBLISHED: dict[str, tuple[str, str]] = {
    sm.STEP: ("relay_step", "Last finished training step"),
    sm.TIME_ELAPSED: ("relay_elapsed_seconds", "Seconds since the first step started"),
    om.REWARD_MEAN: ("relay_reward_mean", "Mean reward of the step's responses (every sample drawn)"),
    om.REWARD_ACCURACY: ("relay_reward_accuracy", "Share of responses with the correct answer"),
    om.REWARD_FORMAT_RATE: ("relay_reward_format_rate", "Share of responses with a final answer the grader finds"),
    om.RESPONSE_LENGTH_MEAN: ("relay_response_length_mean", "Mean response length, tokens"),
    pm.ADVANTAGE_ZERO_GROUPS: ("relay_zero_groups_frac", "Share of trained groups without reward variance"),
    pm.ACTOR_KL: ("relay_kl", "KL to the reference policy, token mean"),
    pm.ACTOR_ENTROPY: ("relay_entropy", "Policy entropy, token mean"),
    pm.ACTOR_GRAD_NORM: ("relay_grad_norm", "Gradient norm before clipping"),
    pm.LOGPROB_GAP_ROLLOUT_MEAN: ("relay_logprob_gap_mean", "Rollout vs learner log-prob gap, mean"),
    pm.LOGPROB_GAP_ROLLOUT_MAX: ("relay_logprob_gap_max", "Rollout vs learner log-prob gap, max"),
    pm.OFFPOLICY_STALENESS_MEAN: ("relay_staleness_mean", "Updates between sampling and training, mean"),
    sm.TIMING_STEP: ("relay_step_seconds", "Wall time of the training step"),
    sm.TIMING_ROLLOUT: ("relay_rollout_seconds", "Wall time of the rollout phase"),
    sm.TIMING_ACTOR_REF_AND_REWARD: ("relay_actor_ref_and_reward_seconds", "Wall time of log-probs and grading"),
    sm.TIMING_UPDATE: ("relay_update_seconds", "Wall time of the learner update"),
    sm.TIMING_ROLLOUT_WAIT: ("relay_rollout_wait_seconds", "Pipelined runs: the update's wait for its batch"),
    sm.SYNC_SECONDS: ("relay_sync_seconds", "Weight sync: learner export plus engine loads"),
    sm.TIMING_OVERHEAD: ("relay_overhead_seconds", "Step time outside any role's compute"),
    sm.THROUGHPUT_ROLLOUT: ("relay_rollout_tokens_per_second", "Rollout new tokens per second"),
    sm.THROUGHPUT_ACTOR_REF: ("relay_actor_ref_tokens_per_second", "Actor+ref tokens per second"),
    sm.THROUGHPUT_LEARNER: ("relay_learner_tokens_per_second", "Learner tokens per second"),
    sm.THROUGHPUT_REWARD: ("relay_reward_items_per_second", "Graded responses per second"),
    sm.MEMORY_ROLES_PEAK: ("relay_roles_peak_rss_gib", "Sum of the roles' peak resident memory"),
    sm.MEMORY_PEAK_RSS.format(role="rollout"): ("relay_rollout_peak_rss_gib", "Rollout role's peak resident memory"),
    sm.MEMORY_PEAK_RSS.format(role="actor_ref"): (
        "relay_actor_ref_peak_rss_gib",
        "Actor+ref role's peak resident memory",
    ),
    sm.MEMORY_PEAK_RSS.format(role="reward"): ("relay_reward_peak_rss_gib", "Reward role's peak resident memory"),
    sm.MEMORY_PEAK_RSS.format(role="learner"): ("relay_learner_peak_rss_gib", "Learner role's peak resident memory"),
    vm.VAL_ACCURACY: ("relay_val_accuracy_greedy", "Held-out greedy accuracy at the last validation"),
    om.AGENT_TURNS_MEAN: ("relay_agent_turns_mean", "Multi-turn rollouts: model turns per response, mean"),
    om.AGENT_TOOL_CALLS_PER_RESPONSE: ("relay_agent_tool_calls_per_response", "Tool calls per response, mean"),
    om.AGENT_TOOL_ERRORS: ("relay_agent_tool_errors", "Tool calls answered with an error in the step"),
    om.AGENT_TOOL_TIMEOUTS: ("relay_agent_tool_timeouts", "Tool calls that timed out in the step"),
    om.AGENT_TOOL_LATENCY_P50: ("relay_agent_tool_latency_p50_seconds", "Tool call latency, median"),
    om.AGENT_TOOL_LATENCY_P95: ("relay_agent_tool_latency_p95_seconds", "Tool call latency, 95th percentile"),
    om.AGENT_CORRECT_WITH_TOOL: ("relay_agent_correct_with_tool_share", "Correct answers with a tool call"),
}

# Ray's default metrics report interval (RAY_metrics_report_interval_ms), milliseconds.
DEFAULT_REPORT_INTERVAL_MS = 10_000


def refresh_seconds(environ: dict[str, str] | None = None) -> float:
    """Half of Ray's metrics report interval (``RAY_metrics_report_interval_ms``, default 10 s), at least 0.2 s:
    every report window sees the gauges set at least once."""
    env = os.environ if environ is None else environ
    try:
        interval_ms = float(env.get("RAY_metrics_report_interval_ms", DEFAULT_REPORT_INTERVAL_MS))
    except ValueError:
        interval_ms = DEFAULT_REPORT_INTERVAL_MS
    return max(interval_ms / 2000.0, 0.2)


class StepGauges:
    """One Ray gauge per published metric, tagged ``run=<run name>``, re-set with its last value every
    ``refresh_s`` seconds on a daemon thread until :meth:`close` (a metric stays until a later step has it
    again: ``val/*`` keeps the last validation's value between validations)."""

    def __init__(self, run_name: str, refresh_s: float | None = None) -> None:
        from ray.util.metrics import Gauge

        self.refresh_s = refresh_seconds() if refresh_s is None else refresh_s
        self.gauges: dict[str, Any] = {}
        for key, (name, description) in PUBLISHED.items():
            gauge = Gauge(name, description=description, tag_keys=("run",))
            gauge.set_default_tags({"run": run_name})
            self.gauges[key] = gauge
        self.last: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refresh, name="relay-step-gauges", daemon=True)
        self._thread.start()

    def publish(self, metrics: dict[str, float]) -> None:
        """Set every published metric that ``metrics`` has; the others keep their last value."""
        with self._lock:
            for key, gauge in self.gauges.items():
                if key in metrics and metrics[key] is not None:
                    self.last[key] = float(metrics[key])
                    gauge.set(self.last[key])

    def _refresh(self) -> None:
        while not self._stop.wait(self.refresh_s):
            with self._lock:
                for key, value in self.last.items():
                    self.gauges[key].set(value)

    def close(self) -> None:
        """Stop re-setting the gauges (the run is over; Ray drops them after its report window)."""
        self._stop.set()
        self._thread.join(timeout=max(self.refresh_s, 1.0) + 1.0)
