"""Every metric the driver derives for a step, from what the phases returned: the batch's reward and length
figures, memory, the timing figures (collect compute, overlap saving, sync, overhead), staleness, and dynamic
sampling's passes merged into one step's figures.

The phases report what they measured themselves (their wall times, the roles' own compute, throughput and
memory); this module only combines them, the same way for the on-policy step (:mod:`driver.step`) and the
pipelined one (:mod:`driver.pipeline`). Pure functions of dicts and batches: golden-value tests in
``tests/driver/test_step_metrics.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from relay.agent.metrics import correct_with_tool_share
from relay.data_proto import DataProto
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm

# The roles' own compute inside the step's phases (each role reports its own)
ROLLOUT_COMPUTE, ACTOR_REF_COMPUTE, REWARD_COMPUTE, UPDATE_COMPUTE = (
    sm.TIMING_ROLE_COMPUTE.format(role=role) for role in ("rollout", "actor_ref", "reward", "update")
)


def batch_metrics(batch: DataProto) -> dict[str, float]:
    """The trained batch's reward, accuracy and length figures (``response/length_*``: the model's tokens; a
    multi-turn response's tool tokens are ``agent/tool_tokens_mean``)."""
    lengths = batch.batch["response_length"]
    agent = {}
    if "tool_calls" in batch.batch:  # multi-turn rollouts (relay/agent)
        share = correct_with_tool_share(batch.batch["acc"], batch.batch["tool_calls"])
        agent = {om.AGENT_CORRECT_WITH_TOOL: share}
    return agent | {
        om.REWARD_MEAN: float(batch.batch["scores"].mean()),
        om.REWARD_STD: float(batch.batch["scores"].std()),
        om.REWARD_ACCURACY: float(batch.batch["acc"].mean()),
        om.RESPONSE_LENGTH_MEAN: float(lengths.mean()),
        om.RESPONSE_LENGTH_MAX: float(lengths.max()),
        pm.BATCH_SEQUENCES: float(len(batch)),
        pm.BATCH_PROMPT_WIDTH: float(batch.batch["prompts"].shape[1]),
        pm.BATCH_RESPONSE_WIDTH: float(batch.batch["responses"].shape[1]),
    }


def reward_metrics(batch: DataProto, m: Mapping[str, float]) -> dict[str, float]:
    """The trained batch's figures (:func:`batch_metrics`), with one rule for dynamic sampling: ``reward/mean`` and
    ``reward/accuracy`` are always the policy's, over every sample drawn. Without filtering that is the trained
    batch; with ``algorithm.filter_groups`` the step's metrics ``m`` carry every sample's figures
    (``filter/sampled_*``) and the kept rows' are reported as ``reward/trained_*``.

    Worked example: 8 samples drawn with mean reward 0.25, the 4 kept with 0.5: ``reward/mean`` 0.25,
    ``reward/trained_mean`` 0.5.
    """
    out = batch_metrics(batch)
    if om.FILTER_SAMPLED_REWARD_MEAN in m:
        out[om.REWARD_TRAINED_MEAN] = out[om.REWARD_MEAN]
        out[om.REWARD_TRAINED_ACCURACY] = out[om.REWARD_ACCURACY]
        out[om.REWARD_MEAN] = m[om.FILTER_SAMPLED_REWARD_MEAN]
        out[om.REWARD_ACCURACY] = m[om.FILTER_SAMPLED_ACCURACY]
    return out


def memory_metrics(m: Mapping[str, float]) -> dict[str, float]:
    """``memory/roles_peak_rss_gib``: the roles' reported peaks (``memory/<role>_peak_rss_gib``) summed."""
    peaks = [v for k, v in m.items() if k.startswith(sm.MEMORY_PREFIX) and k.endswith("_peak_rss_gib")]
    return {sm.MEMORY_ROLES_PEAK: sum(peaks)}


def collect_compute_seconds(m: Mapping[str, float], side_by_side: bool) -> float:
    """The roles' compute inside the phases before the update: the rollout's, then the actor_ref log-probs and the
    grading, which count once (the longer) when they ran side by side and added up when one waited for the other.

    Worked example: rollout 10 s, log-probs 4 s, grading 3 s: 14 s side by side, 17 s back to back.
    """
    pair = (m.get(ACTOR_REF_COMPUTE, 0.0), m.get(REWARD_COMPUTE, 0.0))
    return m.get(ROLLOUT_COMPUTE, 0.0) + (max(pair) if side_by_side else sum(pair))


def overlap_metrics(m: Mapping[str, float], overlapped: bool) -> dict[str, float]:
    """What running reward beside the actor_ref log-probs saved: the two roles' own compute times summed
    (the phase's length had they run back to back at those speeds) minus the phase's wall time
    (``timing/actor_ref_and_reward``).

    Worked example: log-probs 8 s and grading 5 s inside their roles, phase wall time 9 s -> saving 4 s,
    ``timing/reward_overlap_saving_frac`` 4 / 13 = 0.31. Run back to back (``overlapped`` False) the saving
    is reported as 0. On a machine whose cores both roles need, each role's compute time grows when they
    overlap, so this is the saving at the overlapped speeds; ``reward.overlap_with_actor_ref=false`` measures
    the sequential phase directly."""
    back_to_back = m.get(ACTOR_REF_COMPUTE, 0.0) + m.get(REWARD_COMPUTE, 0.0)
    saving = max(0.0, back_to_back - m[sm.TIMING_ACTOR_REF_AND_REWARD]) if overlapped else 0.0
    return {
        sm.TIMING_REWARD_OVERLAP_SAVING: saving,
        sm.TIMING_REWARD_OVERLAP_SAVING_FRAC: saving / back_to_back if back_to_back > 0 else 0.0,
    }


def derived_timing_metrics(
    m: Mapping[str, float], *, collect_busy: float, sync_wall: float, sync_busy: float
) -> dict[str, float]:
    """The step's figures derived from its phase times (``timing/step``, ``sync/export_seconds``, the roles'
    ``timing/*_compute``), for the on-policy and the pipelined step alike.

    ``collect_busy``: the seconds of the step spent on the phases before the update (on-policy: the roles' compute,
    :func:`collect_compute_seconds`; pipelined: the wait for the collect that ran beside the last update).
    ``sync_wall``: the engines' load of the new weights as the driver saw it (on-policy: the sync phase's wall time;
    pipelined: the load before the step's collect, which ran in the collect thread). ``sync_busy``: the part of that
    load inside this step (on-policy: the slowest engine's own load time; pipelined: 0).

    - ``sync/seconds``: the learner's export plus ``sync_wall``;
    - ``timing/reward_share_of_step``: the reward role's compute over the step;
    - ``timing/driver_and_ray_overhead``: the step's wall time that no role's compute and no wait explains.

    Worked example: a 40 s step with collect 14 s, update 20 s, export 1 s, loads 2 s (sync wall 2.5 s), grading 3 s:
    ``sync/seconds`` 3.5, reward share 0.075, overhead 40 - (14 + 20 + 1 + 2) = 3.
    """
    step, export = m[sm.TIMING_STEP], m[sm.SYNC_EXPORT_SECONDS]
    busy = collect_busy + m.get(UPDATE_COMPUTE, 0.0) + export + sync_busy
    return {
        sm.SYNC_SECONDS: export + sync_wall,
        sm.TIMING_REWARD_SHARE: m.get(REWARD_COMPUTE, 0.0) / step,
        sm.TIMING_OVERHEAD: max(0.0, step - busy),
    }


def staleness_metrics(m: Mapping[str, float], batch: DataProto, step: int) -> dict[str, float]:
    """How many updates the learner made since the weights of each sample (``offpolicy/staleness_*``), and the
    IS weight and log-prob gap beside it. One collect runs between two syncs, so every row of a step has the same
    version; the mean and max would show it if that changed.

    Worked example: step 5 trained on rows sampled with weights version 3 -> staleness 2, and the learner's
    ``logprob_gap/rollout_vs_learner_mean`` is reported as ``offpolicy/logprob_gap_mean_staleness_2``.
    """
    row_staleness = step - batch.batch["weights_version"].astype(np.float64)
    staleness = float(row_staleness.max())
    out = {pm.OFFPOLICY_STALENESS_MEAN: float(row_staleness.mean()), pm.OFFPOLICY_STALENESS_MAX: staleness}
    if pm.ACTOR_ROLLOUT_IS_WEIGHT in m:
        out[pm.OFFPOLICY_IS_WEIGHT_MEAN] = m[pm.ACTOR_ROLLOUT_IS_WEIGHT]
    if pm.LOGPROB_GAP_ROLLOUT_MEAN in m:
        out[pm.OFFPOLICY_GAP_AT_STALENESS.format(staleness=int(staleness))] = m[pm.LOGPROB_GAP_ROLLOUT_MEAN]
    return out


def sum_pass_metrics(per_pass: list[dict[str, float]]) -> dict[str, float]:
    """One step's role metrics from several sequential passes: ``timing/*`` and ``recovery/*`` add up (the passes
    ran one after another), ``memory/*`` and ``*_max`` take the largest, ``offpolicy/weights_version`` the oldest,
    anything else is the mean."""
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for m in per_pass for k in m):
        values = [m[key] for m in per_pass if key in m]
        if key.startswith((sm.TIMING_PREFIX, sm.RECOVERY_PREFIX)):
            out[key] = float(sum(values))
        elif key.startswith(sm.MEMORY_PREFIX) or key.endswith("_max"):
            out[key] = float(max(values))
        elif key == pm.OFFPOLICY_WEIGHTS_VERSION:
            out[key] = float(min(values))
        else:
            out[key] = float(np.mean(values))
    return out
