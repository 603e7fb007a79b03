"""Dynamic sampling (``algorithm.filter_groups``): only groups with reward variance reach the learner, and
extra rollout passes refill the step to its batch size. Real roles on the tiny model, with a toy reward
under which about half of the groups score 0 on every sample."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from driver.collect import collect_phase
from driver.dynamic_sampling import Passes
from driver.launch import start_roles, stop_roles
from driver.step import run_step
from placement.plan import build_plan
from relay.config import load_config
from relay.data_proto import DataProto
from relay.grpo import group_rows
from relay.grpo.kl_controller import KLController
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource, example_uid

BATCH, N = 4, 4


@pytest.fixture(scope="module")
def filtered(ray_session, tiny_model_dir):
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml",
        [
            f"model.path={tiny_model_dir}",
            "rollout.engine=hf",  # the filter is engine-independent; the HF engine starts in seconds
            "reward.mode=function",
            "reward.function=tests.driver.odd_questions_reward:token_share_on_odd_questions",
            "reward.function_kwargs={target_stop: 4096}",
            f"rollout.batch_size={BATCH}",
            f"rollout.n={N}",
            "data.max_response_length=16",
            "algorithm.filter_groups.enable=true",
            "algorithm.ref_log_prob_source=actor_ref",  # the kept rows' reference forward runs after the passes
            "algorithm.filter_groups.max_extra_passes=6",
        ],
        environ={},
    )
    cfg = loaded.cfg
    roles = start_roles(loaded, build_plan(cfg), str(tiny_model_dir))
    prompts = PromptSource.from_config(cfg.data, AutoTokenizer.from_pretrained(tiny_model_dir), BATCH)
    yield cfg, roles, prompts
    stop_roles(roles)


def _groups(batch) -> list[np.ndarray]:
    return [batch.batch["scores"][rows] for rows in group_rows(batch.non_tensor["uid"])]


def test_only_groups_with_signal_are_trained_and_the_batch_is_refilled(filtered) -> None:
    cfg, roles, prompts = filtered
    before = prompts.batcher.state_dict()["position"]
    batch, m = run_step(
        roles, prompts.next_batch(), cfg, 0, KLController.from_config(cfg.algorithm), prompts.next_batch
    )
    groups = _groups(batch)
    assert len(batch) == BATCH * N and len(groups) == BATCH
    assert all(np.ptp(g) > 0 for g in groups), groups
    assert m["filter/groups_kept"] == BATCH and m["filter/groups_filled"] == 0
    assert m["advantage/zero_groups_frac"] == 0.0
    sampled = m["filter/prompts_sampled"]
    assert sampled == BATCH + m["filter/groups_dropped"] + m["filter/groups_surplus"]
    assert prompts.batcher.state_dict()["position"] - before == sampled  # the cursor moved past every prompt
    assert m["filter/extra_passes"] >= 1 and m["filter/groups_dropped"] >= 1  # ~half the questions are even
    assert m["filter/extra_rollout_seconds"] > 0
    # the reference forward ran on the trained rows, aligned with them
    assert batch.batch["ref_log_probs"].shape == batch.batch["response_mask"].shape
    assert np.all(batch.batch["ref_log_probs"][batch.batch["response_mask"] == 0] == 0)
    # reward/mean is the policy's (every sample drawn); the trained rows leave out the all-zero groups
    assert m["reward/mean"] == m["filter/sampled_reward_mean"] < m["reward/trained_mean"]
    assert m["reward/trained_mean"] == pytest.approx(float(batch.batch["scores"].mean()))


def test_when_the_passes_run_out_the_step_trains_on_what_it_has(filtered) -> None:
    cfg, roles, prompts = filtered
    no_extra = OmegaConf.merge(cfg, {"algorithm": {"filter_groups": {"max_extra_passes": 0}}})
    batch, m = run_step(
        roles, prompts.next_batch(), no_extra, 1, KLController.from_config(no_extra.algorithm), prompts.next_batch
    )
    kept, filled = int(m["filter/groups_kept"]), int(m["filter/groups_filled"])
    assert m["filter/extra_passes"] == 0 and m["filter/prompts_sampled"] == BATCH
    assert kept + filled == BATCH and len(batch) == BATCH * N
    spreads = [np.ptp(g) for g in _groups(batch)]
    assert all(s > 0 for s in spreads[:kept]) and all(s == 0 for s in spreads[kept:])  # signal groups first
    assert m["advantage/zero_groups_frac"] == filled / BATCH


def test_the_filter_runs_inside_the_pipeline(filtered) -> None:
    """With ``trainer.max_staleness=1`` the collect thread runs the extra passes: the trained groups all
    vary and the samples are one update old."""
    from driver.pipeline import RolloutPipeline, run_pipelined_step

    cfg, roles, prompts = filtered
    piped = OmegaConf.merge(cfg, {"trainer": {"max_staleness": 1}})
    first = roles.weights.version  # the steps run above each synced once
    pipe = RolloutPipeline(roles, piped, prompts, 1, first, KLController.from_config(piped.algorithm))
    try:
        rows = [run_pipelined_step(roles, pipe, piped, step) for step in (first, first + 1)]
    finally:
        pipe.drain()
        pipe.close()
    for batch, _ in rows:
        assert len(_groups(batch)) == BATCH and all(np.ptp(g) > 0 for g in _groups(batch))
    assert [m["offpolicy/staleness_max"] for _, m in rows] == [0.0, 1.0]


def test_unsolved_prompts_are_retried_first_at_their_temperature(filtered) -> None:
    """``retry_unsolved``: pass 1 samples pass 0's unsolved prompts again (here the even-length questions, which the
    reward scores 0 in every sample) before new prompts are drawn; the retry draws no new prompt from the data."""
    cfg, roles, prompts = filtered
    retry = {"enable": True, "temperature": 1.3}
    retrying = OmegaConf.merge(cfg, {"algorithm": {"filter_groups": {"max_extra_passes": 1, "retry_unsolved": retry}}})
    step_prompts = prompts.next_batch()
    even = [q for q in step_prompts.non_tensor["question"] if len(q) % 2 == 0]
    assert even, "the step needs an unsolved prompt: pick another batch"
    before = prompts.batcher.state_dict()["position"]
    batch, m = run_step(
        roles, step_prompts, retrying, 2, KLController.from_config(retrying.algorithm), prompts.next_batch
    )
    assert m["filter/extra_passes"] == 1 and m["filter/retried_prompts"] == len(even)
    assert m["filter/retries_solved"] == 0  # the reward scores an even-length question 0 whatever is sampled
    assert m["filter/prompts_sampled"] == BATCH + len(even)
    assert prompts.batcher.state_dict()["position"] == before  # the retry drew nothing new
    assert not any(uid.endswith("/retry") for uid in batch.non_tensor["uid"])  # retried groups stayed constant
    assert batch.meta_info["temperature"] == cfg.rollout.temperature  # the forwards' temperature is the policy's


def test_unsolved_prompts_come_back_in_the_next_step_draw(filtered, tiny_model_dir) -> None:
    """``data.revisit_unsolved``: the collect reports each pass's grades to the prompt source, whose next step draw
    starts with the unsolved prompts (the even-length questions, 0 in every sample), up to its share."""
    cfg, roles, _ = filtered
    revisit = {"enable": True, "share": 0.5, "delay": 1, "times": 1}
    data = OmegaConf.merge(cfg.data, {"revisit_unsolved": revisit})
    source = PromptSource.from_config(data, AutoTokenizer.from_pretrained(tiny_model_dir), BATCH)
    first = source.next_batch()
    rows = zip(first.non_tensor["uid"], first.non_tensor["question"], strict=True)
    unsolved = [example_uid(uid) for uid, question in rows if len(question) % 2 == 0]
    assert unsolved, "the step needs an unsolved prompt: pick another batch"
    kl = KLController.from_config(cfg.algorithm)
    collect_phase(roles, first, cfg, 3, kl, source.next_batch, source.observe_graded)
    second = source.next_batch()
    back = min(len(unsolved), BATCH // 2)
    assert [example_uid(u) for u in second.non_tensor["uid"][:back]] == unsolved[:back]  # the first pass's first
    revisited = int(source.revisit_metrics()["data/revisited"])
    assert back <= revisited <= BATCH // 2  # then the extra passes' unsolved ones, up to the share
    assert all(len(q) % 2 == 0 for q in second.non_tensor["question"][:revisited])  # every one of them unsolved


def test_the_rollout_samples_at_the_temperature_it_is_given(filtered) -> None:
    """The retry's temperature reaches the engine: the same prompts and seed at another temperature give other
    log-probs, and the rows say which temperature they were sampled at."""
    cfg, roles, prompts = filtered
    batch = prompts.next_batch()
    default, _ = roles.rollout.generate(batch, 7, 1)
    hotter, _ = roles.rollout.generate(batch, 7, 1, 1.7)
    assert default.meta_info["temperature"] == cfg.rollout.temperature and hotter.meta_info["temperature"] == 1.7
    assert not np.array_equal(default.batch["rollout_log_probs"], hotter.batch["rollout_log_probs"])


def _graded(uids: list[str], scores: list[float], acc: list[float]) -> DataProto:
    return DataProto.from_dict(
        batch={"scores": np.array(scores, np.float32), "acc": np.array(acc, np.float32)},
        non_tensor={"uid": np.array(uids, dtype=object)},
    )


def test_a_retry_trains_only_the_groups_it_solved() -> None:
    """A retried group with no right sample varies in score by format alone (0.1 boxed, 0 unboxed): it is dropped,
    and so are its samples from the policy's figures; a retried group with a right sample may train."""
    passes = Passes()
    passes.add(_graded(["a", "a", "b", "b"], [0.1, 0.0, 1.0, 0.1], [0, 0, 1, 0]), {}, "scores", 2, retry=False)
    assert passes.kept == 2  # a first pass keeps format-only signal, as the filter always has
    retried = _graded(["a/retry"] * 2 + ["c/retry"] * 2, [0.1, 0.0, 1.0, 0.0], [0, 0, 1, 0])
    passes.add(retried, {}, "scores", 2, retry=True)
    assert (passes.retried, passes.retries_solved, passes.kept, passes.prompts) == (2, 1, 3, 4)
    assert list(passes.parts[-1].non_tensor["uid"]) == ["c/retry", "c/retry"]
    assert passes.sampled("scores").tolist() == pytest.approx([0.1, 0.0, 1.0, 0.1])  # the policy's samples only
