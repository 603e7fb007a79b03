"""One on-policy GRPO step on the driver: collect (rollout, actor_ref || reward, advantage), update, weight sync.

``run_step`` reads as the step does: each phase takes the batch (or the weights) and returns what it made and its
metrics; the step adds them up with the batch's own figures and the timing metrics derived from the phases
(:func:`driver.timing.derived_timing_metrics`). With ``trainer.max_staleness`` >= 1, :mod:`driver.pipeline` runs the
same phases with the collect ahead.
"""

from __future__ import annotations

from functools import partial

from driver import fanout
from driver.collect import collect_phase, grades_beside_log_probs
from driver.dynamic_sampling import ExtraPrompts, MorePrompts
from driver.launch import Roles, Weights, call
from driver.recovery import with_recovery
from driver.timing import PhaseTimer, collect_compute_seconds, derived_timing_metrics
from relay.agent.metrics import correct_with_tool_share
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.learner.inputs import LEARNER_INPUTS
from relay.rank_metrics import merge_rank_metrics


def update_phase(
    roles: Roles, batch: DataProto, cfg: RelayConfig, step: int, free_synced: bool = True
) -> tuple[Weights, dict[str, float]]:
    """The learner update of ``batch`` on every learner host: the new weights (rank 0 publishes them: an
    object-store ref or a memory-file handle) and the learner's metrics with ``timing/update``.

    ``free_synced`` drops the driver's ref to the last synced weights first: nothing needs them from here on
    in the on-policy loop (a role restarted during the update gets this step's weights in the sync), and the
    learner's put then reuses their object-store pages instead of touching fresh ones in every process that
    writes or reads them (measured: +0.5 GiB RSS per step in the learner and the rollout). The pipeline
    keeps them: its collect thread may still resync a restarted rollout with them.
    """
    timer = PhaseTimer(step)
    train_keys = [k for k in LEARNER_INPUTS if k in batch.batch]
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "sleep", "rollout sleep")
    if free_synced:
        fanout.release_weights(roles, roles.weights_ref)
        roles.weights_ref = None
    with timer.phase("timing/update", role="learner", span="update"):
        # Every learner host gets its share of the rows at once (the update is one JAX job across them).
        refs = fanout.submit_shares(roles.learners, "update", batch.select(train_keys, []))
        outs = call(fanout.names("learner", refs), refs, "update")
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "wake_up", "rollout wake-up")
    return outs[0][0], {**merge_rank_metrics([metrics for _, metrics in outs]), **timer.metrics()}


def sync_phase(roles: Roles, weights: Weights, version: int) -> dict[str, float]:
    """Every rollout replica and actor copy loads ``weights`` as ``version``: each role's slowest load and the
    phase's wall time (``timing/sync``)."""
    timer = PhaseTimer(version - 1)
    with timer.phase("timing/sync"):
        rollout_load, actor_load = fanout.load_weights(roles, weights, version)
    return {"sync/rollout_load_seconds": rollout_load, "sync/actor_load_seconds": actor_load, **timer.metrics()}


def batch_metrics(batch: DataProto) -> dict[str, float]:
    """The trained batch's reward, accuracy and length figures (``response/length_*``: the model's tokens; a
    multi-turn response's tool tokens are ``agent/tool_tokens_mean``)."""
    lengths = batch.batch["response_length"]
    agent = {}
    if "tool_calls" in batch.batch:  # multi-turn rollouts (relay/agent)
        share = correct_with_tool_share(batch.batch["acc"], batch.batch["tool_calls"])
        agent = {"agent/correct_with_tool_share": share}
    return agent | {
        "reward/mean": float(batch.batch["scores"].mean()),
        "reward/std": float(batch.batch["scores"].std()),
        "reward/accuracy": float(batch.batch["acc"].mean()),
        "response/length_mean": float(lengths.mean()),
        "response/length_max": float(lengths.max()),
        "batch/sequences": float(len(batch)),
        "batch/prompt_width": float(batch.batch["prompts"].shape[1]),
        "batch/response_width": float(batch.batch["responses"].shape[1]),
    }


def reward_and_memory_metrics(m: dict[str, float], batch: DataProto) -> dict[str, float]:
    """The batch's figures (:func:`batch_metrics`) and the roles' peak memory summed, given the step's metrics so
    far ``m``. With dynamic sampling ``reward/mean`` and ``reward/accuracy`` are those of every sample drawn (the
    policy's), and the trained rows' are ``reward/trained_*``."""
    out = batch_metrics(batch)
    if "filter/sampled_reward_mean" in m:
        out["reward/trained_mean"], out["reward/mean"] = out["reward/mean"], m["filter/sampled_reward_mean"]
        out["reward/trained_accuracy"], out["reward/accuracy"] = out["reward/accuracy"], m["filter/sampled_accuracy"]
    peaks = [v for k, v in m.items() if k.startswith("memory/") and k.endswith("_peak_rss_gib")]
    out["memory/roles_peak_rss_gib"] = sum(peaks)
    return out


def run_step(
    roles: Roles, prompts: DataProto, cfg: RelayConfig, step: int, more_prompts: MorePrompts | None = None
) -> tuple[DataProto, dict[str, float]]:
    """One GRPO step across the roles; returns the final batch and the step's metrics. ``more_prompts(size,
    sample_pass)`` draws the prompts of dynamic sampling's extra passes (``algorithm.filter_groups``).

    A rollout/actor_ref/reward actor that dies during the step is restarted by Ray, given the current
    weights, and the phases before the update are run again from the driver's copy of the prompts
    (``recovery/restarts``); a death during the sync is healed the same way. The update itself is
    never repeated.
    """
    timer, recovered = PhaseTimer(step), []
    more = ExtraPrompts(more_prompts) if more_prompts is not None else None  # the same prompts on a retry
    with timer.phase("timing/step"):
        collect = partial(collect_phase, roles, prompts, cfg, step, more)
        batch, collect_metrics = with_recovery(collect, roles, cfg.trainer, recovered.append)
        weights, update_metrics = update_phase(roles, batch, cfg, step)
        sync = partial(sync_phase, roles, weights, step + 1)
        sync_metrics = with_recovery(sync, roles, cfg.trainer, recovered.append)
    m = {"step": step, **collect_metrics, **update_metrics}
    m.update(reward_and_memory_metrics(m, batch))
    m.update({"recovery/restarts": float(len(recovered)), **sync_metrics, **timer.metrics()})
    m.update(
        derived_timing_metrics(
            m,
            collect_busy=collect_compute_seconds(m, grades_beside_log_probs(cfg)),
            sync_wall=m["timing/sync"],
            sync_busy=max(m["sync/rollout_load_seconds"], m["sync/actor_load_seconds"]),
        )
    )
    return batch, m
