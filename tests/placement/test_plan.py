"""Plans from configs: which actors each role gets, which bundle each sits in, and refused layouts."""

import pickle

import pytest

from placement.plan import GIB, PlacementError, actor_name, build_plan, describe_plan
from relay.config import ConfigError, load_config
from relay.repo import REPO_ROOT
from roles.role_call import RoleFailedError

CONFIGS = REPO_ROOT / "configs"
# configs/default.yaml has the learner compute the reference; these make the actor_ref role compute it.
ACTOR_REF = ["algorithm.ref_log_prob_source=actor_ref"]


def _plan(overrides=(), preset="default.yaml", strategy=None):
    return build_plan(load_config(CONFIGS / preset, list(overrides), environ={}).cfg, strategy)


def _of(plan, role: str) -> list:
    return [s for s in plan.slots if s.role == role]


def test_cpu_default_is_one_bundle_per_role() -> None:
    plan = _plan(["learner.resources.cpus=1.0", *ACTOR_REF])
    assert [s.name for s in plan.slots] == ["rollout-0", "actor_ref-0", "reward-0", "learner-0"]
    (group,) = plan.groups
    assert group.name == "roles" and group.strategy == "STRICT_PACK"  # auto, before the cluster is known
    assert group.bundles == ({"CPU": 0.5},) * 3 + ({"CPU": 1.0},)
    assert plan.totals() == {"CPU": 2.5}
    assert all(s.device == "cpu" and s.group == "roles" for s in plan.slots)
    with pytest.raises(KeyError, match="no actor for role 'critic'"):
        plan.slot("critic")


def test_rollout_replicas_and_actor_ref_gpus_become_ranks() -> None:
    plan = _plan(
        ["rollout.replicas=3", "rollout.gpus_per_replica=1", "rollout.tensor_parallel_size=1", "actor_ref.gpus=2"]
        + ACTOR_REF
    )
    assert [s.name for s in _of(plan, "rollout")] == ["rollout-0", "rollout-1", "rollout-2"]
    assert [s.gpus for s in _of(plan, "rollout")] == [1.0, 1.0, 1.0]
    assert [(s.name, s.gpus, s.device) for s in _of(plan, "actor_ref")] == [
        ("actor_ref-0", 1.0, "gpu"),
        ("actor_ref-1", 1.0, "gpu"),
    ]
    assert plan.totals()["GPU"] == 5.0
    assert len({s.bundle for s in plan.slots}) == len(plan.slots)  # no colocation: a bundle each


def test_four_gpu_preset_lands_rollout_on_1_actor_ref_on_2_reward_on_1() -> None:
    plan = _plan(preset="gsm8k_qwen25_3b_4gpu.yaml")
    (group,) = plan.groups
    gpus = {s.name: group.bundles[s.bundle].get("GPU", 0) for s in plan.slots}
    assert gpus == {"rollout-0": 1, "actor_ref-0": 2, "actor_ref-1": 2, "reward-0": 1, "learner-0": 2}
    assert plan.totals()["GPU"] == 4
    learner, a0, a1 = plan.slot("learner"), plan.slot("actor_ref", 0), plan.slot("actor_ref", 1)
    # actor_ref shares the learner's bundle: the learner reserves both GPUs, each actor_ref rank uses one
    assert a0.bundle == a1.bundle == learner.bundle and learner.gpus == 2
    assert (a0.gpus, a0.borrows_gpus_from, a0.gpu_offset, a0.borrowed_gpus) == (0.0, "learner", 0, 1)
    assert (a1.gpu_offset, a1.borrowed_gpus) == (1, 1)
    assert group.bundles[learner.bundle]["CPU"] == 12  # 4 (learner) + 2 x 4 (actor_ref ranks)
    text = describe_plan(plan)
    assert "actor_ref-1 [gpu, float32] (on learner's GPU 1)" in text
    assert "reward-0 [gpu]" in text  # rule grading: no model, no dtype


def test_tpu_learner_gets_a_spread_group_one_host_per_bundle() -> None:
    plan = _plan(preset="gsm8k_qwen25_7b_tpu_2host.yaml")
    roles, learner = plan.group("roles"), plan.group("learner")
    assert learner.strategy == "STRICT_SPREAD" and learner.bundles == ({"CPU": 4.0, "TPU": 4.0},) * 2
    assert [(s.name, s.group, s.bundle, s.tpus, s.device) for s in _of(plan, "learner")] == [
        ("learner-0", "learner", 0, 4.0, "tpu"),
        ("learner-1", "learner", 1, 4.0, "tpu"),
    ]
    assert all("TPU" not in b for b in roles.bundles)


def test_multi_host_gpu_learner_is_spread_too() -> None:
    plan = _plan(
        ["learner.accelerator=gpu", "learner.hosts=2", "learner.devices_per_host=8", "train.micro_batch_size=8"]
    )
    assert plan.group("learner").bundles == ({"CPU": 0.5, "GPU": 8.0},) * 2


def test_memory_and_resolved_strategy_are_carried() -> None:
    plan = _plan(["learner.resources.memory_gib=6"], strategy="PACK")
    assert plan.group("roles").strategy == "PACK"
    assert plan.group("roles").bundles[plan.slot("learner").bundle] == {"CPU": 0.5, "memory": 6 * GIB}
    explicit = _plan(["placement.strategy=SPREAD"], strategy="PACK")
    assert explicit.group("roles").strategy == "SPREAD"  # the user's choice wins over auto


def test_cpu_colocation_shares_one_bundle() -> None:
    plan = _plan(["placement.colocate=[[actor_ref, reward]]", *ACTOR_REF])
    assert plan.slot("actor_ref").bundle == plan.slot("reward").bundle
    assert len(plan.group("roles").bundles) == 3 and plan.totals() == {"CPU": 2.0}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["placement.colocate=[[actor_ref, learner]]", "learner.hosts=2"], "cannot share a bundle"),
        (["placement.colocate=[[actor_ref, learner]]", "learner.accelerator=tpu"], "cannot share a bundle"),
        (
            [
                "placement.colocate=[[rollout, learner]]",
                "rollout.gpus_per_replica=1",
                "learner.accelerator=gpu",
                "learner.hosts=1",
            ],
            None,
        ),
    ],
)
def test_colocation_layouts(overrides, message) -> None:
    if message is None:
        plan = _plan(overrides)
        assert plan.slot("rollout").borrows_gpus_from == "learner" or plan.slot("learner").borrows_gpus_from
        return
    with pytest.raises(PlacementError, match=message):
        _plan(overrides)


@pytest.mark.parametrize(
    ("colocate", "message"),
    [
        ("[[actor_ref]]", "needs at least two roles"),
        ("[[actor_ref, critic]]", "unknown role 'critic'"),
        ("[[actor_ref, learner], [learner, reward]]", "in more than one colocation group"),
    ],
)
def test_bad_colocation_is_a_config_error(colocate, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[f"placement.colocate={colocate}"], environ={})


KL_OFF = ["algorithm.use_kl_loss=false", "algorithm.use_kl_in_reward=false"]


@pytest.mark.parametrize(
    ("overrides", "actor_refs"),
    [
        ([], 0),  # the KL loss reads the reference log-probs; configs/default.yaml: the learner computes them
        (ACTOR_REF, 1),
        (["algorithm.ref_log_prob_source=auto"], 1),  # auto in full fine-tuning: the actor_ref role
        (KL_OFF, 0),  # nobody reads them: no actor_ref actor at all
        ([*KL_OFF, "algorithm.use_kl_in_reward=true", *ACTOR_REF], 1),  # the KL penalty in the reward does
        ([*KL_OFF, "algorithm.old_log_prob_source=actor"], 1),  # the actor copy alone
        ([*KL_OFF, "actor_ref.gpus=2", "rollout.gpus_per_replica=1"], 0),
        (["model.lora.rank=16", "algorithm.ref_log_prob_source=auto"], 0),  # LoRA: the base, adapters off
        (["model.lora.rank=16", "algorithm.ref_log_prob_source=actor_ref"], 1),
        (["model.lora.rank=16", "algorithm.old_log_prob_source=actor"], 1),  # the actor copy still needs it
    ],
)
def test_actor_ref_actors_only_when_their_log_probs_are_read(overrides, actor_refs) -> None:
    plan = _plan(overrides)
    assert len(_of(plan, "actor_ref")) == actor_refs
    assert [s.role for s in plan.slots if s.role != "actor_ref"] == ["rollout", "reward", "learner"]
    assert len(plan.group("roles").bundles) == 3 + actor_refs


def test_no_actor_ref_leaves_its_colocation_partner_alone() -> None:
    plan = _plan([*KL_OFF, "placement.colocate=[[actor_ref, reward]]"])
    assert [s.name for s in plan.slots] == ["rollout-0", "reward-0", "learner-0"]
    assert plan.group("roles").bundles == ({"CPU": 0.5},) * 3
    assert "actor_ref" not in describe_plan(plan)


def test_an_actor_name_carries_its_role_and_rank_across_processes() -> None:
    name = actor_name("actor_ref", 1)
    assert (name, name.role, name.rank) == ("actor_ref-1", "actor_ref", 1)
    back = pickle.loads(pickle.dumps(name))  # Ray pickles names inside errors and arguments
    assert (back, back.role, back.rank) == (name, "actor_ref", 1)
    assert {"actor_ref-1": "found"}[back] == "found"  # keys of ready_info and of every name map
    failed = pickle.loads(pickle.dumps(RoleFailedError("died", actor_name("tools", 2), died=True)))
    assert (failed.actor, failed.role, failed.died) == ("tools-2", "tools", True)
