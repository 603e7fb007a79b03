"""run_validation through Ray: two rollout replicas (transformers engine) share the problems, the reward actor
grades in chunks, the driver gets the val/* metrics. Actors are created directly, not through start_roles."""

from __future__ import annotations

import json

import numpy as np
import pytest
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from driver.role_group import Roles
from driver.role_settings import rollout_worker_settings
from driver.validation import run_validation
from relay.config import load_config
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import validation_prompts
from roles.reward import RewardSettings, RewardWorker
from roles.rollout import RolloutWorker


@pytest.fixture(scope="module")
def roles_and_cfg(ray_session, tiny_model_dir):
    ray = ray_session
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [f"model.path={tiny_model_dir}", "rollout.engine=hf", "data.max_response_length=8", "reward.workers=0"],
        environ={},
    )
    cfg, c = loaded.cfg, OmegaConf.to_container(loaded.cfg, resolve=True)
    rollout = [
        ray.remote(RolloutWorker)
        .options(num_cpus=0.25)
        .remote(rollout_worker_settings(loaded, str(tiny_model_dir), 1009 * rank))
        for rank in range(2)
    ]
    reward = ray.remote(RewardWorker).options(num_cpus=0.25).remote(RewardSettings.from_section(c["reward"]))
    ray.get([h.ready.remote() for h in [*rollout, reward]])
    roles = Roles(plan=None, placement_groups={})
    roles.rollout.handles.extend(rollout)
    roles.reward.handles.append(reward)
    yield roles, cfg
    for h in [*rollout, reward]:
        ray.kill(h)


def test_run_validation_over_two_replicas(roles_and_cfg, tiny_model_dir, tmp_path) -> None:
    roles, cfg = roles_and_cfg
    prompts = validation_prompts(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), 5)
    written = tmp_path / "validation" / "step_000007.jsonl"
    m = run_validation(roles, prompts, k=2, step=7, grade_chunk=4, responses=written)  # 15 rows in 4 reward calls
    assert m["val/problems"] == 5.0
    for key in ("val/accuracy_greedy", "val/pass@2", "val/mean@2"):
        assert 0.0 <= m[key] <= 1.0, key
    assert 0 < m["val/new_tokens"] <= 5 * 3 * 8 and m["val/greedy_length_mean"] <= 8
    assert (m["val/grading_errors"], m["val/grading_timeouts"]) == (0.0, 0.0)
    assert m["val/seconds"] >= m["val/generate_seconds"] + m["val/grade_seconds"] - 1e-6
    assert all(np.isfinite(v) for v in m.values()) and m["val/weights_version"] == 0.0
    records = [json.loads(line) for line in written.read_text().splitlines()]
    assert [r["sample"] for r in records] == [0, 1, 2] * 5  # each problem's greedy response, then its samples
    assert [r["uid"] for r in records[::3]] == list(prompts.non_tensor["uid"])
    greedy = [r["correct"] for r in records if r["sample"] == 0]
    assert sum(greedy) / 5 == m["val/accuracy_greedy"]
    again = run_validation(roles, prompts, k=2, step=8)
    assert again["val/greedy_length_mean"] == m["val/greedy_length_mean"]  # greedy: same responses every time
