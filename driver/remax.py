"""ReMax's baseline on the driver (``algorithm.adv_estimator=remax``): one greedy response per prompt, sampled by
the rollout replicas and graded by the reward role like the training samples; its reward is the baseline of
every sample of that prompt (:func:`relay.grpo.advantage.remax_advantage`). The greedy rows are not trained on.

The greedy request goes out right after the step's rollout, beside the actor_ref log-probs and the samples'
grading, so on a rollout that would otherwise wait it costs about ``1 / rollout.n`` of a rollout.
"""

from __future__ import annotations

import numpy as np

from driver.role_group import Pending, Roles
from driver.timing import PhaseTimer
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.rollout_batch import merge_rollout_parts, pop_metrics


def submit_greedy(roles: Roles, prompts: DataProto, step: int) -> Pending:
    """Start one greedy response per prompt on the rollout replicas (sent right after the step's rollout)."""
    return roles.rollout.submit("generate", prompts, step, 0, True, step=step)


def baseline_scores(
    roles: Roles, greedy: Pending, gen: DataProto, cfg: RelayConfig, step: int
) -> tuple[np.ndarray, dict[str, float]]:
    """Grade the greedy responses and give every row of ``gen`` its prompt's greedy reward ([B], by ``uid``), with
    the metrics ``remax/baseline_mean`` and ``timing/remax_baseline`` (greedy gather + grading)."""
    timer = PhaseTimer(step)
    with timer.phase(sm.TIMING_REMAX_BASELINE):
        rows = roles.rollout.rows(greedy, "remax greedy baseline", merge=merge_rollout_parts)
        pop_metrics(rows)
        graded, _ = roles.reward.grade(rows, cfg.reward.mode, step)
        by_uid = dict(zip(rows.non_tensor["uid"], graded.batch["scores"], strict=True))
        missing = sorted({u for u in gen.non_tensor["uid"] if u not in by_uid})
        if missing:
            raise RuntimeError(f"remax: no greedy baseline for prompts {missing[:3]} (step {step})")
        baselines = np.array([by_uid[u] for u in gen.non_tensor["uid"]], np.float64)
    return baselines, {pm.REMAX_BASELINE_MEAN: float(np.mean(list(by_uid.values()))), **timer.metrics()}
