"""The memory estimate: parameter counts, the learner against XLA, per-node sums, and the refusal table."""

import json
from pathlib import Path

import pytest

from placement.cluster import declared_nodes, ray_node_ram
from placement.fit import estimate_on_nodes, memory_estimate, plan_for, print_plan
from placement.learner_device import learner_activation_bytes, learner_logits_bytes
from placement.learner_memory import learner_shape
from placement.memory import estimate_memory
from placement.memory_coefficients import COEFFICIENTS
from placement.model_shape import ModelShape, count_params, read_model_shape
from placement.nodes import NodeView
from placement.plan import GIB, PlacementError, build_plan
from relay.config import load_config
from relay.models.prepare_smollm2 import default_model_dir
from relay.repo import REPO_ROOT

CONFIGS = REPO_ROOT / "configs"
SMOLLM2 = default_model_dir()

# Public sizes of Qwen2.5-3B-Instruct (tied) and -7B-Instruct (untied): their config.json fields.
QWEN25_3B = {
    "model_type": "qwen2",
    "hidden_size": 2048,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "intermediate_size": 11008,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}
QWEN25_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
}


def _cfg(overrides=(), preset="default.yaml"):
    return load_config(CONFIGS / preset, list(overrides), environ={}).cfg


def _safetensors_params(model_dir: Path) -> int:
    """Parameters stored in a checkpoint, read from the safetensors headers (8-byte length + JSON)."""
    total = 0
    for f in model_dir.glob("*.safetensors"):
        with f.open("rb") as fh:
            header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        for name, meta in header.items():
            if name != "__metadata__":
                n = 1
                for d in meta["shape"]:
                    n *= d
                total += n
    return total


def _ram_node(name: str, ram_gib: float, cpus: float = 2.0) -> NodeView:
    res = {"CPU": cpus}
    return NodeView(name, res, dict(res), ram_bytes=ram_gib * GIB, ram_source="test")


def test_param_count_matches_the_tiny_checkpoints(tiny_model_dir, tiny_untied_model_dir, tmp_path) -> None:
    from relay.models.tiny import build_tiny_llama, build_tiny_qwen2, build_tiny_qwen3

    biased = build_tiny_llama(tmp_path / "biased", attention_bias=True, mlp_bias=True)
    qwen2 = build_tiny_qwen2(tmp_path / "qwen2", tie_word_embeddings=False)
    qwen3 = build_tiny_qwen3(tmp_path / "qwen3", num_attention_heads=8)  # explicit head_dim 32, not 64 / 8
    for model_dir in (tiny_model_dir, tiny_untied_model_dir, biased, qwen2, qwen3):
        assert count_params(read_model_shape(model_dir)) == _safetensors_params(model_dir), model_dir


@pytest.mark.skipif(not (SMOLLM2 / "config.json").is_file(), reason="SmolLM2 not converted (scripts/setup.sh)")
def test_param_count_matches_smollm2() -> None:
    assert count_params(read_model_shape(SMOLLM2)) == _safetensors_params(SMOLLM2) == 134_515_008


def test_param_count_of_qwen25_shapes() -> None:
    # Published totals: 3.09B (3B, tied) and 7.62B (7B, untied).
    assert count_params(ModelShape.from_hf_config(QWEN25_3B)) == pytest.approx(3.09e9, rel=0.005)
    assert count_params(ModelShape.from_hf_config(QWEN25_7B)) == pytest.approx(7.62e9, rel=0.005)


def _xla_temp_bytes(shape: ModelShape, rows: int, width: int, slots: int, remat: bool = False) -> int:
    """XLA's temp memory of the learner's compiled optimizer step for these shapes (compile only)."""
    import jax
    import jax.numpy as jnp

    from benchmarks.harness.synthetic import adamw_section
    from relay.learner import train_step
    from relay.learner.grpo_loss import LossSettings
    from relay.learner.optimizer import build_optimizer
    from relay.models.llama_config import LlamaConfig
    from relay.models.llama_flax import LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        rms_norm_eps=1e-5,
        rope_theta=1e5,
        tie_word_embeddings=shape.tied,
    )
    model = LlamaForCausalLM(config, remat=remat, scan_layers=True)  # as the learner builds it
    one = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    params = jax.eval_shape(lambda i: model.init(jax.random.PRNGKey(0), i, i, i)["params"], one)
    tx, _ = build_optimizer(adamw_section(1e-6), 1, 0)
    loss = LossSettings(0.2, 0.2, 0.001, "low_var_kl", 1.0, old_from_batch=False)
    accum = 2

    def arr(dtype, *dims):
        return jax.ShapeDtypeStruct((accum, rows, *dims), dtype)

    batch = {k: arr(jnp.int32, width) for k in ("input_ids", "segment_ids", "position_ids", "branch_ids")}
    batch |= {k: arr(jnp.int32, slots) for k in ("slot_index", "targets", "slot_sequence")}
    batch |= {k: arr(jnp.float32, slots) for k in ("slot_mask", "slot_seq_tokens", "advantages", "ref_log_probs")}
    batch["row_sequences"] = arr(jnp.float32)
    step = train_step.make_train_step(model, tx, loss)
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    opt = jax.eval_shape(tx.init, params)
    compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt, batch, key, {}).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def _estimated_temp(shape: ModelShape, rows: int, width: int, slots: int, remat: bool = False) -> float:
    """The estimate's lines that live in XLA's temp buffer: gradient buffers, activations, logits, the rest."""
    grads = 4.0 * count_params(shape) * COEFFICIENTS["learner_grad_buffers"]
    fixed = COEFFICIENTS["learner_fixed_gib"] * GIB
    return (
        grads + learner_activation_bytes(shape, rows, width, remat=remat) + learner_logits_bytes(shape, slots) + fixed
    )


# XLA drifts as the learner changes; beyond this factor the COEFFICIENTS table needs re-measuring
# (compile shapes with _xla_temp_bytes, read temp_size_in_bytes, refit the learner_* lines by least squares).
XLA_FACTOR = 1.5


@pytest.mark.parametrize(
    ("layers", "rows", "width", "slots", "remat"),
    [(None, 4, 256, 256, False), (2, 4, 384, 256, False), (2, 2, 512, 512, True)],
)
def test_learner_estimate_against_xla(tiny_model_dir, layers, rows, width, slots, remat) -> None:
    """The tiny model (logits-dominated), then SmolLM2's layer shapes with 2 layers (activation-dominated)."""
    if layers is None:
        shape = read_model_shape(tiny_model_dir)
    else:
        shape = ModelShape(576, layers, 9, 3, 64, 1536, 49152, tied=True)
    xla = _xla_temp_bytes(shape, rows, width, slots, remat)
    estimate = _estimated_temp(shape, rows, width, slots, remat)
    assert 1 / XLA_FACTOR < estimate / xla < XLA_FACTOR, f"estimate {estimate / GIB:.3f} vs XLA {xla / GIB:.3f} GiB"


def test_learner_width_and_rows_follow_the_config() -> None:
    ls = learner_shape(_cfg(), 4)
    assert (ls.rows, ls.width) == (4, 512)  # 256 + 256 rounded up to train.length_bucket=64
    ls = learner_shape(_cfg(["data.max_response_length=300", "train.length_bucket=128"]), 4)
    assert ls.width == 640
    cfg = _cfg(["learner.accelerator=gpu", "learner.devices_per_host=4", "train.micro_batch_size=8"])
    assert learner_shape(cfg, 8).rows == 2  # rows split over the 4 data-parallel devices


def _estimate(overrides=(), preset="default.yaml", shape: ModelShape | None = None):
    cfg = _cfg(overrides, preset)
    return estimate_memory(cfg, build_plan(cfg), shape or ModelShape(576, 30, 9, 3, 64, 1536, 49152, tied=True))


ACTOR_REF = ["algorithm.ref_log_prob_source=actor_ref"]  # the default preset's learner computes the reference


def test_default_job_breakdown() -> None:
    est = _estimate()
    learner, rollout = est.actor("learner-0"), est.actor("rollout-0")
    params = 4.0 * 134_515_008
    assert [a.actor for a in est.actors] == ["rollout-0", "reward-0", "learner-0"]
    assert learner.host["weights"] == 2 * params  # the policy and the frozen reference copy
    assert learner.host["optimizer"] == 2 * params  # adamw: mu and nu
    assert learner.host["activations"] > learner.host["logits"] > 0
    # rollout.kv_cache_gib=auto: 4 groups of at most 13 blocks of 128 tokens (a 255-token prompt's full block shared
    # by its 4 samples, 3 blocks each for the rest) x 30 layers x K and V x 3 heads x 64 x 4 bytes
    assert rollout.host["kv_cache"] == 4 * 13 * 128 * 30 * 2 * 3 * 64 * 4
    assert not learner.accel and est.actor("reward-0").host["runtime"] > 0
    with_role = _estimate(ACTOR_REF)
    assert with_role.actor("actor_ref-0").host["weights"] == params  # the reference only (old log-probs: learner)
    assert with_role.actor("learner-0").host["weights"] == params


def test_the_knobs_move_their_lines() -> None:
    base = _estimate(["train.remat=false"]).actor("learner-0").host  # the default preset has remat on
    assert _estimate(["train.optimizer.name=lion"]).actor("learner-0").host["optimizer"] == base["optimizer"] / 2
    assert "optimizer" not in _estimate(["train.optimizer.name=sgd"]).actor("learner-0").host
    one_row = _estimate(["train.remat=false", "train.micro_batch_size=1"]).actor("learner-0").host["activations"]
    four_rows = _estimate(["train.remat=false", "train.micro_batch_size=4"]).actor("learner-0").host["activations"]
    assert one_row < 0.6 * four_rows
    assert _estimate(["train.remat=true"]).actor("learner-0").host["activations"] < base["activations"]
    assert _estimate(["rollout.kv_cache_gib=3"]).actor("rollout-0").host["kv_cache"] == 3 * GIB
    ref = _estimate(["algorithm.old_log_prob_source=actor", *ACTOR_REF]).actor("actor_ref-0").host
    assert ref["weights"] == 2 * 4.0 * 134_515_008 and ref["sync"] > 0  # reference + actor copy
    ref = _estimate(["actor_ref.micro_batch_size=2", *ACTOR_REF]).actor("actor_ref-0").host
    assert ref["activations"] < _estimate(ACTOR_REF).actor("actor_ref-0").host["activations"] / 3
    assert ref["logits"] == _estimate(ACTOR_REF).actor("actor_ref-0").host["logits"]  # LM-head chunks of fixed size
    kv = _estimate(["rollout.kv_cache_gib=auto", "rollout.replicas=2", "rollout.max_prompts_per_pass_per_process=1"])
    assert kv.actor("rollout-0").host["kv_cache"] == 1 * 13 * 128 * 30 * 2 * 3 * 64 * 4  # 1 prompt x n=4 per pass


def test_solver_mode_adds_an_engine_to_reward() -> None:
    cfg = _cfg(preset="gsm8k_smollm2_solver.yaml")
    shape = ModelShape(576, 30, 9, 3, 64, 1536, 49152, tied=True)
    reward = estimate_memory(cfg, build_plan(cfg), shape, solver=shape).actor("reward-0").host
    assert reward["kv_cache"] == 1.0 * GIB and reward["weights"] > 4.0 * 134_515_008  # untied for vLLM
    assert reward["runtime"] > COEFFICIENTS["rollout_runtime_gib"] * GIB  # engine + actor + grader


def test_the_reward_model_kinds_estimate_their_own_memory(tiny_model_dir) -> None:
    """A classifier: fp32 weights and one forward's activations; a judge: its engine, with a KV cache for
    ``micro_batch_size`` prompts of ``max_length`` tokens and its one-token answer (vLLM), or transformers' cache."""
    from relay.models.tiny import build_tiny_classifier

    classifier = build_tiny_classifier("llama", tiny_model_dir.parent / "rm-memory")
    sources = "reward.sources=[{source: reward, weight: 1.0}, {source: reward_model, weight: 0.5}]"
    rm = ["reward_model.enable=true", "reward_model.micro_batch_size=4", "reward_model.max_length=256", sources]
    params = 4.0 * count_params(read_model_shape(str(tiny_model_dir)))
    scored = _estimate([*rm, f"reward_model.path={classifier}"]).actor("reward_model-0").host
    assert scored["weights"] == 4.0 * count_params(read_model_shape(str(classifier))) and scored["activations"] > 0
    judge = [*rm, "reward_model.kind=judge", f"reward_model.path={tiny_model_dir}"]
    vllm = _estimate(judge).actor("reward_model-0").host
    shape = read_model_shape(str(tiny_model_dir))
    per_token = shape.layers * 2 * shape.kv_heads * shape.head_dim * 4
    assert vllm["kv_cache"] == pytest.approx(4 * 3 * 128 * per_token)  # 4 prompts of 256 + 1 tokens: 3 CPU blocks
    assert vllm["weights"] >= params  # loaded untied by vLLM: + the head
    hf = _estimate([*judge, "reward_model.engine=hf"]).actor("reward_model-0").host
    assert hf["weights"] == params and hf["kv_cache"] == 4 * 257 * per_token  # transformers: every token, no blocks


def test_remat_keeps_only_layer_inputs() -> None:
    """The scanned remat keeps each layer's input and recomputes one layer at a time, on any backend."""
    shape = ModelShape(576, 30, 9, 3, 64, 1536, 49152, tied=True)
    full = learner_activation_bytes(shape, 4, 512)
    assert learner_activation_bytes(shape, 4, 512, remat=True) < full / 10


def test_default_job_fits_this_24gib_machine_and_not_an_8gib_one() -> None:
    cfg = _cfg()
    plan_for(cfg, [_ram_node("big", 24.0)])  # no error
    with pytest.raises(PlacementError) as err:
        plan_for(cfg, [_ram_node("small", 8.0)])
    text = str(err.value)
    assert "does not fit: node small" in text and "learner-0" in text and "activations" in text
    assert "of 8.0 GiB [test]: DOES NOT FIT" in text
    assert "train.optimizer.name" in text and "placement.memory_headroom_gib" in text  # the largest lines first
    assert "placement.memory_check=false" in text
    plan_for(
        load_config(CONFIGS / "default.yaml", ["placement.memory_check=false"], environ={}).cfg,
        [_ram_node("small", 8.0)],
    )  # the check is off


def test_headroom_counts() -> None:
    report, _ = estimate_on_nodes(_cfg(), build_plan(_cfg()), [_ram_node("n", 24.0)])
    need = report.nodes[0].need / GIB
    plan_for(_cfg([f"placement.memory_headroom_gib={23.9 - need:.2f}"]), [_ram_node("n", 24.0)])
    with pytest.raises(PlacementError, match="does not fit"):
        plan_for(_cfg([f"placement.memory_headroom_gib={24.1 - need:.2f}"]), [_ram_node("n", 24.0)])


def test_nodes_without_memory_are_not_checked_and_a_missing_model_is_skipped() -> None:
    plan_for(_cfg(), [NodeView("n", {"CPU": 2.0})])  # no RAM, no Ray memory: nothing to compare with
    report, why = estimate_on_nodes(_cfg(["model.path=/nonexistent"]), build_plan(_cfg()), [_ram_node("n", 1.0)])
    assert report is None and "not estimated" in why and "model.path" in why


def test_ray_memory_resource_is_the_fallback() -> None:
    node = NodeView("n", {"CPU": 2.0, "memory": 6.0 * GIB})
    with pytest.raises(PlacementError, match=r"Ray's memory resource"):
        plan_for(_cfg(), [node])


def test_ray_node_ram_sources() -> None:
    ram, source = ray_node_ram({"memory": 10 * GIB, "object_store_memory": 4 * GIB}, on_this_machine=False)
    assert ram == 14 * GIB and "object_store_memory" in source
    ram, source = ray_node_ram({"memory": 1.0}, on_this_machine=True)
    assert ram > 1 * GIB and source == "total RAM of this machine"
    assert ray_node_ram({}, on_this_machine=False)[0] is None


def _qwen_dir(tmp_path: Path, fields: dict) -> str:
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return str(tmp_path)


def _cluster_overrides(model_dir: str, **cluster: int) -> list[str]:
    """``model.path=model_dir`` and a ``cluster.<key>=<value>`` override per keyword, in their order."""
    return [f"model.path={model_dir}", *(f"cluster.{key}={value}" for key, value in cluster.items())]


def test_four_gpu_preset_per_gpu_sums(tmp_path) -> None:
    """Qwen2.5-3B on 4 x 80 GiB: the learner shares GPU 0/1 with actor_ref-0/1. As the preset stands (bf16 compute,
    remat, learner state sharded over both GPUs) it fits; with params replicated, no remat and float32 compute it
    does not, and the refusal names the fixes."""
    model_dir = _qwen_dir(tmp_path, QWEN25_3B)
    no_gpu_memory = _cluster_overrides(model_dir, nodes=1, gpus_per_node=4, cpus_per_node=32, memory_gib_per_node=256)
    over = [*no_gpu_memory, "cluster.gpu_memory_gib=80"]
    cfg = _cfg(over, "gsm8k_qwen25_3b_4gpu.yaml")
    nodes = declared_nodes(cfg.cluster)
    report, _ = estimate_on_nodes(cfg, plan_for(cfg, nodes), nodes)  # fits: no error
    by_device = {d.device: d for d in report.devices}
    assert set(by_device["GPU 0 of bundle roles[1]"].actors) == {"actor_ref-0", "learner-0"}
    assert set(by_device["GPU 1 of bundle roles[1]"].actors) == {"actor_ref-1", "learner-0"}
    rollout = report.estimate.actor("rollout-0").accel_total
    assert rollout == pytest.approx(0.4 * 80 * GIB + COEFFICIENTS["gpu_context_gib"] * GIB)  # its memory fraction
    unfitted = ["train.remat=false", "train.compute_dtype=float32", "learner.mesh={dp: -1, fsdp: 1, tp: 1}"]
    with pytest.raises(PlacementError, match=r"GPU 0 of bundle roles\[1\] on node-0 needs \d+\.\d of 80\.0 GiB") as err:
        plan_for(_cfg([*over, *unfitted], "gsm8k_qwen25_3b_4gpu.yaml"), nodes)
    assert "set train.remat=true" in str(err.value) and "lower train.micro_batch_size" in str(err.value)
    unknown = _cfg(no_gpu_memory, "gsm8k_qwen25_3b_4gpu.yaml")
    report, _ = estimate_on_nodes(unknown, plan_for(unknown, nodes), nodes)
    assert any("cluster.gpu_memory_gib" in n for n in report.notes)


def test_tpu_learner_hosts(tmp_path) -> None:
    model_dir = _qwen_dir(tmp_path, QWEN25_7B)
    over = _cluster_overrides(
        model_dir, nodes=1, gpus_per_node=4, cpus_per_node=32, tpu_hosts=2, tpus_per_host=4, tpu_memory_gib=32
    )
    cfg = _cfg(over, "gsm8k_qwen25_7b_tpu_2host.yaml")
    nodes = declared_nodes(cfg.cluster)
    report, _ = estimate_on_nodes(cfg, plan_for(cfg, nodes, check_memory=False), nodes)
    chips = [d for d in report.devices if d.kind == "tpu"]
    assert len(chips) == 8 and {d.node for d in chips} == {"tpu-host-0", "tpu-host-1"}
    learner = report.estimate.actor("learner-0")
    assert learner.accel["weights"] == pytest.approx(4.0 * 7.62e9 / 8, rel=0.01)  # fsdp over the 8 chips


def test_print_plan_shows_the_table_and_the_manifest_form() -> None:
    text, fits = print_plan(_cfg(), [_ram_node("n", 24.0)], "test")
    assert fits and "memory estimate (GiB" in text and "learner-0" in text and "fits: yes" in text
    text, fits = print_plan(_cfg(), [_ram_node("n", 8.0)], "test")
    assert not fits and "does not fit" in text
    data = memory_estimate(_cfg(), [_ram_node("n", 24.0)])
    assert json.loads(json.dumps(data)) == data
    # the policy and the frozen reference (configs/default.yaml: the learner computes the reference log-probs)
    assert data["fits"] and data["actors"]["learner-0"]["host_gib"]["weights"] == pytest.approx(1.002, abs=0.001)
    assert data["nodes"]["n"]["memory_gib"] == 24.0 and data["nodes"]["n"]["memory_source"] == "test"


def test_lora_keeps_optimizer_state_and_the_sync_to_the_adapters() -> None:
    full = _estimate(ACTOR_REF).actor("learner-0").host  # no reference copy in this learner
    lora = _estimate(["model.lora.rank=16"]).actor("learner-0").host  # its reference is the base: no copy either
    adapters = 4.0 * 4_884_480  # rank 16 on all seven projections of SmolLM2 (lora_param_count's example)
    assert lora["optimizer"] == 2 * adapters and lora["sync"] == adapters
    assert lora["weights"] == full["weights"] + adapters  # the frozen base, never copied, plus the adapters
    assert lora["grads"] < full["grads"] / 20


# The learner's update on one NVIDIA H200 (JAX 0.11.2, 2026-11-26), peak_bytes_in_use, GiB: remat, bf16 compute on
# fp32 master weights, AdamW, cuDNN attention, one micro-batch of 8 packed rows x 2048 tokens (16 prompts x 8 samples,
# prompts 128-256 and responses 64-512 tokens). The coefficients fitted to them: placement/memory_coefficients.py.
GPU_PEAKS = {"smollm2-135m": 3.22, "qwen2.5-0.5b": 9.35, "qwen2.5-3b": 50.8}
GPU_PEAK_OVERRIDES = (
    "data.max_prompt_length=1024",
    "data.max_response_length=1024",
    "learner.devices_per_host=1",
    "actor_ref.gpus=0",
    "reward.gpus=0",
    "placement.colocate=[]",
    "cluster.nodes=1",
    "cluster.gpus_per_node=2",
    "cluster.cpus_per_node=16",
    "cluster.gpu_memory_gib=141",
    "rollout.batch_size=16",
    "rollout.n=8",
    "train.mini_batch_size=16",
    "train.micro_batch_size=8",
    "train.share_prompts=false",
)


@pytest.mark.parametrize("model", list(GPU_PEAKS))
def test_the_gpu_learner_line_is_within_15_percent_of_the_measured_peak(model: str, tmp_path) -> None:
    """The per-GPU learner line of the 4-GPU preset under the measuring run's settings, against its H200 peak (the
    shapes: benchmarks.gpu.learner, which prints the same line beside the peak it measures)."""
    from benchmarks.gpu.learner import SHAPES

    cfg = _cfg([f"model.path={_qwen_dir(tmp_path, SHAPES[model])}", *GPU_PEAK_OVERRIDES], "gsm8k_qwen25_3b_4gpu.yaml")
    learner = estimate_memory(cfg, build_plan(cfg), read_model_shape(tmp_path)).actor("learner-0")
    assert learner.accel_total / GIB == pytest.approx(GPU_PEAKS[model], rel=0.15)
