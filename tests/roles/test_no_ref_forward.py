"""Steps with the KL off: no reference forward, and no actor_ref actor at all unless an actor copy is needed.

Runs whole steps of the tiny model on a local Ray (transformers rollout, the cheapest to start). The learner
takes batches without ``ref_log_probs`` when no KL reads them.
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers import AutoTokenizer

from driver.launch import start_roles, stop_roles
from driver.role_group import Roles
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.data_proto import DataProto
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource

KL_OFF = ["algorithm.use_kl_loss=false", "algorithm.use_kl_in_reward=false"]


def _two_steps(tiny_model_dir, overrides: list[str]) -> tuple[Roles, list[tuple[DataProto, dict]]]:
    """Start the roles for tiny.yaml with the KL off plus ``overrides``, run steps 0 and 1, stop the roles."""
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={tiny_model_dir}", "rollout.engine=hf", "data.max_response_length=16", *KL_OFF, *overrides],
        environ={},
    )
    roles = start_roles(loaded, build_plan(loaded.cfg), str(tiny_model_dir))
    try:
        prompts = PromptSource.from_config(loaded.cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 4)
        steps = [
            run_step(roles, prompts.next_batch(), loaded.cfg, step, KLController.from_config(loaded.cfg.algorithm))
            for step in range(2)
        ]
        return roles, steps
    finally:
        stop_roles(roles)


def test_nothing_reads_actor_ref_so_no_actor_runs(ray_session, tiny_model_dir) -> None:
    roles, steps = _two_steps(tiny_model_dir, [])
    assert len(roles.actor_ref) == 0 and sorted(roles.handles()) == ["learner-0", "reward-0", "rollout-0"]
    for batch, m in steps:
        assert "ref_log_probs" not in batch.batch and "old_log_probs" not in batch.batch
        assert m["actor_ref/ref_forward"] == 0.0 and "timing/actor_ref_compute" not in m
        assert m["sync/actor_load_seconds"] == 0.0 and np.isfinite(m["actor/loss"])
    assert steps[1][1]["logprob_gap/rollout_vs_learner_max"] < 1e-4  # the sync still reached the rollout


@pytest.mark.slow  # a whole trainer run (~30 s); the no-reference case stays in the default run
def test_actor_copy_alone_runs_without_the_reference(ray_session, tiny_model_dir) -> None:
    roles, steps = _two_steps(tiny_model_dir, ["algorithm.old_log_prob_source=actor"])
    assert len(roles.actor_ref) == 1
    for batch, m in steps:
        assert "ref_log_probs" not in batch.batch and "old_log_probs" in batch.batch
        assert m["actor_ref/ref_forward"] == 0.0 and 0.0 <= m["batch/padding_share_actor_ref"] < 1.0
    assert steps[1][1]["logprob_gap/rollout_vs_actor_max"] < 1e-4  # the copy was synced after step 0


@pytest.mark.slow  # a whole trainer run (~30 s); the no-reference case stays in the default run
def test_kl_in_the_reward_alone_runs_the_reference_forward(ray_session, tiny_model_dir) -> None:
    roles, steps = _two_steps(tiny_model_dir, ["algorithm.use_kl_in_reward=true"])
    assert len(roles.actor_ref) == 1
    for batch, m in steps:
        assert "ref_log_probs" in batch.batch and "old_log_probs" not in batch.batch
        assert m["actor_ref/ref_forward"] == 1.0 and "reward/kl_penalty_mean" in m
        assert m["sync/actor_load_seconds"] == 0.0  # a reference alone is never sent the learner's weights
