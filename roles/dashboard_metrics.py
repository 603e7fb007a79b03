"""Per-step metrics published through ``ray.util.metrics``: they show in the Ray dashboard's metrics
view and on every node's Prometheus endpoint (``ray start --metrics-export-port``), tagged by run."""

from __future__ import annotations

from typing import Any

# step metric key -> (Ray metric name, description)
PUBLISHED: dict[str, tuple[str, str]] = {
    "step": ("relay_step", "Last finished training step"),
    "reward/mean": ("relay_reward_mean", "Mean reward of the step's responses"),
    "reward/accuracy": ("relay_reward_accuracy", "Share of responses with the correct answer"),
    "timing/step": ("relay_step_seconds", "Wall time of the training step"),
    "timing/rollout": ("relay_rollout_seconds", "Wall time of the rollout phase"),
    "timing/actor_ref_and_reward": ("relay_actor_ref_and_reward_seconds", "Wall time of log-probs and grading"),
    "timing/update": ("relay_update_seconds", "Wall time of the learner update"),
    "sync/seconds": ("relay_sync_seconds", "Weight sync: learner export plus engine loads"),
    "timing/driver_and_ray_overhead": ("relay_overhead_seconds", "Step time outside any role's compute"),
    "throughput/rollout_tokens_per_s": ("relay_rollout_tokens_per_second", "Rollout new tokens per second"),
    "throughput/actor_ref_tokens_per_s": ("relay_actor_ref_tokens_per_second", "Actor+ref tokens per second"),
    "throughput/learner_tokens_per_s": ("relay_learner_tokens_per_second", "Learner tokens per second"),
    "throughput/reward_items_per_s": ("relay_reward_items_per_second", "Graded responses per second"),
    "memory/roles_peak_rss_gib": ("relay_roles_peak_rss_gib", "Sum of the roles' peak resident memory"),
}


class StepGauges:
    """One Ray gauge per published metric, tagged ``run=<run name>``."""

    def __init__(self, run_name: str) -> None:
        from ray.util.metrics import Gauge

        self.gauges: dict[str, Any] = {}
        for key, (name, description) in PUBLISHED.items():
            gauge = Gauge(name, description=description, tag_keys=("run",))
            gauge.set_default_tags({"run": run_name})
            self.gauges[key] = gauge

    def publish(self, metrics: dict[str, float]) -> None:
        for key, gauge in self.gauges.items():
            if key in metrics:
                gauge.set(float(metrics[key]))
