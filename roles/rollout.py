"""The rollout role: samples ``n`` responses per prompt with per-token log-probs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from relay.agent.engine import AgentEngine
from relay.agent.loop import AgentSettings
from relay.agent.metrics import agent_metrics, row_arrays
from relay.agent.trajectory import Trajectory
from relay.config import typed_section
from relay.config.agent_schema import AgentConfig, ToolsConfig
from relay.config.data_schema import DataConfig
from relay.config.schema import LoraConfig, RolloutConfig
from relay.data_proto import DataProto
from relay.engines.base import Generation, SamplingSettings
from relay.engines.lora_payload import is_adapter_payload
from relay.faults import fault_point
from relay.learner.host_memory import release_free_heap
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.process_identity import process_identity
from relay.rollout_batch import assemble_rollout
from relay.run.logs import apply_role_log
from relay.shared_weights import SharedWeights, opened_weights
from relay.startup import start_up_with_collector_paused
from roles.env import apply_cpu_affinity, apply_torch_threads, memory_metrics
from roles.tool_client import tool_client


@dataclass(frozen=True)
class RolloutSettings:
    """What a rollout replica is built with (:func:`driver.role_settings.rollout_settings`): the ``rollout`` and
    ``data`` sections (typed), the length bucket, its share of a pass's prompts, its seed (replicas draw different
    samples), the LoRA adapter it serves or merges (``model.lora``), the ``tools`` section when the agent loop calls
    tools, and the run's Ray namespace (None: the tools run in this process)."""

    model_path: str
    rollout: RolloutConfig
    data: DataConfig
    bucket: int
    prompts_per_pass: int
    seed: int
    lora: LoraConfig | None = None
    tools: ToolsConfig | None = None
    namespace: str | None = None

    @classmethod
    def from_sections(cls, model_path: str, rollout: Mapping[str, Any], data: Mapping[str, Any], *args: Any,
                      lora: Mapping[str, Any] | None = None, tools: Mapping[str, Any] | None = None,
                      namespace: str | None = None) -> RolloutSettings:  # fmt: skip
        """From plain mappings of the sections (missing keys take their defaults)."""
        return cls(
            model_path,
            typed_section(RolloutConfig, rollout),
            typed_section(DataConfig, data),
            *args,
            lora=None if lora is None else typed_section(LoraConfig, lora),
            tools=None if tools is None else typed_section(ToolsConfig, tools),
            namespace=namespace,
        )


class RolloutWorker:
    """Holds one rollout engine (a replica); receives weights after every update."""

    @start_up_with_collector_paused
    def __init__(self, settings: RolloutSettings) -> None:
        from transformers import AutoTokenizer

        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()
        rollout, data, model_path = settings.rollout, settings.data, settings.model_path
        self.threads = apply_torch_threads(rollout.resources.threads)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.cfg = rollout
        self.max_new_tokens = data.max_response_length
        self.min_prompt_width = data.min_padded_prompt_length
        self.prompts_per_pass = prompts_per_pass = settings.prompts_per_pass
        self.bucket = settings.bucket
        self.seed = seed = settings.seed
        eos = self.tokenizer.eos_token_id
        self.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.engine = build_engine(
            model_path,
            rollout,
            data,
            [eos],
            self.pad_token_id,
            seed,
            prompts_per_pass=prompts_per_pass,
            max_lora_rank=lora_serving_rank(rollout, settings.lora),
        )
        release_free_heap()  # the build's freed memory (checkpoint reads, profiling), before generation lands on it
        self.model_path = model_path
        self._merger: Any = None  # the frozen base, for merging LoRA adapters where the engine cannot serve them
        self.weights_version = 0
        agent = agent_settings(rollout.agent, self.max_new_tokens)
        self.tool_client = None  # the tools role (a Ray run) or tools in this process (no namespace)
        if agent is not None and settings.tools is not None:
            self.tool_client = tool_client(settings.tools, list(rollout.agent.tools), settings.namespace)
        # what samples: the engine, or the agent loop around it (training and validation alike)
        self.sampler: Any = self.engine
        if agent is not None:
            self.sampler = AgentEngine(self.engine.generate, self.tokenizer, self.run_tools, agent)

    def ready(self) -> dict:
        return {"role": "rollout", "threads": self.threads, "engine": self.cfg.engine, **process_identity()}

    def generate(
        self,
        prompts: DataProto,
        step: int,
        sample_pass: int = 0,
        greedy: bool = False,
        temperature: float | None = None,
    ) -> DataProto:
        """``prompts`` carries ``raw_prompt_ids`` (and ``uid``/``question``/``ground_truth``) per prompt;
        the result has ``len(prompts) * n`` rows, the samples of each prompt adjacent. The prompts are
        sampled in passes of at most ``prompts_per_pass`` and padded together at the end. ``sample_pass``
        numbers a step's extra rollouts (dynamic sampling): each draws from its own seed stream. ``greedy``: one
        temperature-0 response per prompt instead (ReMax's baseline, :mod:`driver.remax`). ``temperature``: this
        call's sampling temperature instead of ``rollout.temperature`` (the group filter's retry of unsolved
        prompts); the rows' log-probs are at the temperature they were sampled at."""
        fault_point("rollout.generate", step)
        cfg = self.cfg
        sampling = SamplingSettings(
            n=1 if greedy else cfg.n,
            max_new_tokens=self.max_new_tokens,
            temperature=0.0 if greedy else (cfg.temperature if temperature is None else temperature),
            top_p=1.0 if greedy else cfg.top_p,
            top_k=-1 if greedy else cfg.top_k,
            seed=self.seed * 1_000_003 + step + 15_485_863 * sample_pass,
        )
        raw = [list(p) for p in prompts.non_tensor["raw_prompt_ids"]]
        start = time.perf_counter()
        generations, trajectories = self.sample(raw, sampling)
        seconds = time.perf_counter() - start
        arrays = assemble_rollout(raw, generations, self.pad_token_id, self.bucket, self.min_prompt_width)
        # every sample carries the weights that produced it (the pipeline's staleness is read per row)
        arrays["weights_version"] = np.full(len(arrays["responses"]), self.weights_version, np.int32)
        flat = [g for group in generations for g in group]
        texts = self.tokenizer.batch_decode([g.token_ids for g in flat], skip_special_tokens=True)
        expanded = prompts.select(non_tensor_keys=[k for k in prompts.non_tensor if k != "raw_prompt_ids"])
        expanded = expanded.repeat(sampling.n, interleave=True)
        new_tokens = int(arrays["response_length"].sum())  # the model's: tool tokens are not generated
        metrics = {
            sm.TIMING_ROLE_COMPUTE.format(role="rollout"): seconds,
            sm.THROUGHPUT_ROLLOUT: new_tokens / seconds,
            om.ROLLOUT_TRUNCATED_FRAC: float(np.mean([not g.finished for g in flat])),
            **memory_metrics("rollout"),
        }
        meta = {"prompt_length": arrays["prompts"].shape[1], "pad_token_id": self.pad_token_id}
        if trajectories is not None:
            arrays |= row_arrays(trajectories)
            metrics |= agent_metrics(trajectories)
            meta["tool_spans"] = self.take_tool_spans()
        meta |= {"temperature": sampling.temperature, "weights_version": self.weights_version, "metrics": metrics}
        non_tensor = {**expanded.non_tensor, "response_text": np.array(texts, dtype=object)}
        return DataProto.from_dict(batch=arrays, non_tensor=non_tensor, meta_info=meta)

    def sample(
        self, raw: list[list[int]], sampling: SamplingSettings
    ) -> tuple[list[list[Generation]], list[Trajectory] | None]:
        """``sampling.n`` responses per prompt, in passes of at most ``prompts_per_pass`` prompts (a fresh seed
        stream per pass); with ``rollout.agent.enable`` they are multi-turn, and their trajectories come back too
        (prompt-major)."""
        generations: list[list[Generation]] = []
        self.sampler_trajectories()  # none left from an earlier, failed call
        for i, lo in enumerate(range(0, len(raw), self.prompts_per_pass)):
            pass_sampling = replace(sampling, seed=sampling.seed + 7919 * i)  # a fresh stream per pass
            generations += self.sampler.generate(raw[lo : lo + self.prompts_per_pass], pass_sampling)
        return generations, self.sampler_trajectories()

    def sampler_trajectories(self) -> list[Trajectory] | None:
        """The agent loop's trajectories since the last call (None: single-turn rollouts)."""
        return self.sampler.take_trajectories() if isinstance(self.sampler, AgentEngine) else None

    def take_tool_spans(self) -> list[tuple[float, float]]:
        """The wall-clock spans of the tool calls since the last call (the timeline's tools track)."""
        if self.tool_client is None:
            return []
        spans, self.tool_client.spans = self.tool_client.spans, []
        return spans

    def run_tools(self, calls: list[tuple[str, str]]) -> list[dict]:
        """A turn's tool calls on the tools role (the config has no tools role: every call is an error)."""
        if self.tool_client is None:
            return [{"text": "error: no tools role is running", "status": "error", "seconds": None} for _ in calls]
        return self.tool_client(calls)

    def evaluate(
        self, prompts: DataProto, k: int, seed: int, progress: Callable[[int], None] | None = None
    ) -> DataProto:
        """Validation generations: per prompt one greedy response (temperature 0) and ``k`` samples at the
        rollout's temperature / top-p / top-k, each at most ``data.max_response_length`` tokens.

        ``prompts`` is a prompt batch (``raw_prompt_ids``, ``uid``, ``question``, ``ground_truth``). The result
        has ``len(prompts) * (1 + k)`` rows, each prompt's greedy row first (``sample_index`` 0), in the layout
        of :mod:`relay.evaluation.generation`, ready for the reward role. ``seed`` seeds the samples only;
        training's sampling is untouched (its seeds come from the step, and the torch RNG is restored here).
        ``meta_info["metrics"]``: ``timing/validation_generate_compute``, ``validation/new_tokens``,
        ``throughput/validation_tokens_per_s``; ``meta_info["weights_version"]``: the weights evaluated.
        ``progress(done)`` is called after each chunk of prompts
        (in-process callers; under Ray leave it None).

        Worked example: 3 prompts, ``k=2`` -> 9 rows, ``sample_index`` ``[0, 1, 2, 0, 1, 2, 0, 1, 2]``.
        """
        import torch

        from relay.evaluation.generation import generate_for_validation, validation_rows

        fault_point("rollout.evaluate", self.weights_version)
        cfg = self.cfg
        sampling = SamplingSettings(
            n=k,
            max_new_tokens=self.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            seed=seed,
        )
        raw = [list(p) for p in prompts.non_tensor["raw_prompt_ids"]]
        start = time.perf_counter()
        with torch.random.fork_rng():
            generations = generate_for_validation(self.sampler, raw, sampling, self.eval_chunk_prompts(k), progress)
        self.sampler_trajectories()  # validation's are not the step's
        self.take_tool_spans()
        seconds = time.perf_counter() - start
        rows = validation_rows(prompts, generations, self.tokenizer)
        new_tokens = int(rows.batch["response_length"].sum())
        rows.meta_info["metrics"] = {
            sm.TIMING_VALIDATION_GENERATE_COMPUTE: seconds,
            vm.VALIDATION_NEW_TOKENS: float(new_tokens),
            sm.THROUGHPUT_VALIDATION: new_tokens / max(seconds, 1e-9),
            **memory_metrics("rollout"),
        }
        rows.meta_info["weights_version"] = self.weights_version
        return rows

    def eval_chunk_prompts(self, k: int) -> int:
        """Prompts per engine call in :meth:`evaluate`: as many sequences as a training pass holds
        (``prompts_per_pass * n``, known to fit) for transformers; vLLM schedules its own batches, so it gets
        at least 64 prompts per call."""
        fits = max(1, self.prompts_per_pass * self.cfg.n // max(k, 1))
        return fits if self.cfg.engine == "hf" else max(fits, 64)

    def sleep(self) -> None:
        """Free the engine's KV cache during the update (GPU shared with the learner)."""
        self.engine.sleep()

    def wake_up(self) -> None:
        self.engine.wake_up()

    def load_weights(self, weights: dict[str, np.ndarray] | SharedWeights, version: int) -> dict:
        """Load the learner's weights ``version``: the object store's copy, or the learner's memory file on this
        node (``trainer.weight_sync``), read one tensor at a time."""
        import ray

        fault_point("rollout.load_weights", version - 1)
        start = time.perf_counter()
        release_free_heap()  # generation's freed memory, before the reload's per-layer tensors land on top of it
        with opened_weights(weights, ray.get_runtime_context().get_node_id()) as tensors:
            nbytes = self._load_adapter(tensors) if is_adapter_payload(tensors) else self.engine.load_weights(tensors)
        release_free_heap()
        self.weights_version = version
        return {"seconds": time.perf_counter() - start, "bytes": nbytes}

    def _load_adapter(self, payload: dict) -> int:
        """A LoRA sync: the engine serves the adapter (vLLM with LoRA serving), or it gets the base with the
        adapter merged in (:class:`relay.engines.lora_payload.BaseMerger`); returns the adapter's bytes."""
        from relay.engines.lora_payload import BaseMerger
        from relay.shared_weights import weights_nbytes

        if getattr(self.engine, "serves_lora", False):
            return self.engine.load_adapter(payload)
        if self._merger is None:
            self._merger = BaseMerger(self.model_path)
        self.engine.load_weights(self._merger.merged(payload))
        return weights_nbytes(payload)


def agent_settings(agent: AgentConfig, max_response_length: int) -> AgentSettings | None:
    """The agent loop's settings from ``rollout.agent`` (None: single-turn rollouts)."""
    if not agent.enable:
        return None
    return AgentSettings(int(agent.max_turns), max_response_length, int(agent.result_max_tokens))


def lora_serving_rank(rollout_cfg: RolloutConfig, lora: LoraConfig | None) -> int | None:
    """The rank vLLM is started with LoRA serving for (``rollout.lora_serving``); None: no LoRA serving (full
    fine-tuning, the transformers engine, or adapters merged into the base on every sync)."""
    if lora is None or rollout_cfg.engine != "vllm" or not rollout_cfg.lora_serving:
        return None
    return int(lora.rank)


def build_engine(
    model_path: str,
    rollout_cfg: RolloutConfig,
    data_cfg: DataConfig,
    eos: list[int],
    pad: int,
    seed: int,
    prompts_per_pass: int | None = None,
    max_lora_rank: int | None = None,
) -> Any:
    """The engine ``rollout.engine`` names, behind :class:`relay.engines.base.RolloutEngine`."""
    if rollout_cfg.engine == "hf":
        import torch

        from relay.engines.hf_engine import HFRolloutEngine

        device = "cuda" if torch.cuda.is_available() else "cpu"
        return HFRolloutEngine(model_path, eos, pad, device=device, dtype=rollout_cfg.dtype)
    from relay.engines.vllm_engine import VLLMRolloutEngine

    longest_prompt = max(data_cfg.max_prompt_length, data_cfg.min_padded_prompt_length)
    return VLLMRolloutEngine(
        model_path,
        eos,
        max_model_len=longest_prompt + data_cfg.max_response_length,
        gpu_memory_utilization=rollout_cfg.gpu_memory_utilization,
        kv_cache_gib=resolve_kv_cache_gib(
            model_path, rollout_cfg, longest_prompt, data_cfg.max_response_length, prompts_per_pass
        ),
        tensor_parallel_size=rollout_cfg.tensor_parallel_size,
        dtype=rollout_cfg.dtype,
        enforce_eager=rollout_cfg.enforce_eager,
        seed=seed,
        enable_sleep_mode=rollout_cfg.sleep_during_update,
        max_lora_rank=max_lora_rank,
    )


def resolve_kv_cache_gib(
    model_path: str, rollout_cfg: RolloutConfig, max_prompt: int, max_response: int, prompts_per_pass: int | None
) -> float | None:
    """``rollout.kv_cache_gib`` in GiB; ``auto``: the groups of one pass of this replica at their longest, sharing
    their prompts' full blocks (:mod:`relay.engines.kv_budget`)."""
    value = rollout_cfg.kv_cache_gib
    if value != "auto":
        return value
    from placement.model_shape import read_model_shape
    from relay.engines.kv_budget import CPU_BLOCK_SIZE, GPU_BLOCK_SIZE, rollout_prompts, step_kv_cache_gib

    s = read_model_shape(model_path)
    prompts = rollout_prompts(rollout_cfg.batch_size, rollout_cfg.replicas, prompts_per_pass)
    n = rollout_cfg.n
    block = GPU_BLOCK_SIZE if rollout_cfg.gpus_per_replica else CPU_BLOCK_SIZE
    gib = step_kv_cache_gib(
        s.layers, s.kv_heads, s.head_dim, rollout_cfg.dtype, prompts, n, max_prompt, max_response, block
    )
    print(
        f"rollout.kv_cache_gib=auto: {gib:.3f} GiB ({prompts} prompts x {n} samples of <= {max_prompt} + "
        f"{max_response} tokens, prompts' full blocks shared)",
        flush=True,
    )
    return gib
