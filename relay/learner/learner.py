"""The JAX learner: flax params + an optax optimizer on a device mesh, the GRPO update of a training step.

A step's batch (this process's rows) is split into mini-batches, one optimizer step each, repeated
``ppo_epochs`` times. A mini-batch is rewritten into the row layout of :mod:`relay.packing`
(``packing=True``: whole sequences packed into rows of ``pack_width`` tokens, so no FLOPs go to
padding; ``False``: one padded sequence per row) and goes to the devices as ``[accum, micro, ...]``;
one compiled program (:mod:`relay.learner.train_step`) loops over the micro-batches that hold rows,
accumulates gradients and applies the optimizer. Shapes come from the fixed row width and a few
slot-count buckets, and the compiled programs are cached per shape (``learner/compiles``,
``learner/compile_seconds``), so a new step rarely compiles.

Parameters and optimizer state are sharded over a ``(dp, fsdp, tp)`` mesh of every device of the
JAX job (:mod:`relay.learner.sharding`); each process feeds its own rows, and the global batch is
their concatenation along the row axis of every micro-batch.

An optimizer step whose loss or gradients are non-finite is skipped inside the compiled program
(params and optimizer state unchanged); the learner counts skips (``learner/skipped_steps``,
``learner/skipped_total``), does not advance ``optimizer_steps`` (the learning-rate schedule position)
for them, and raises :class:`NonFiniteUpdateError` once ``max_consecutive_skips`` steps in a row,
across updates, were skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import PartitionSpec as P

from relay.learner.grpo_loss import LossSettings
from relay.learner.host_memory import release_free_heap
from relay.learner.optimizer import build_optimizer
from relay.learner.sharding import (
    DATA_AXES,
    batch_sharding,
    build_mesh,
    opt_state_shardings,
    param_shardings,
    place_host_tree,
    replicated,
)
from relay.learner.train_step import make_accumulate, make_train_step, stack_micro_batches
from relay.models.hf_params import load_hf_checkpoint, params_to_hf
from relay.models.layer_stack import stack_layers, unstack_layers
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM
from relay.models.lora import init_adapters, merged_weights, peft_state_dict
from relay.models.lora_spec import LoraSpec
from relay.packing import RowLayout, layout_rows, round_up, slots_to_sequences

TRAIN_KEYS = ("input_ids", "attention_mask", "position_ids", "response_mask", "advantages")
# Row-layout arrays every compiled step reads (relay.packing); per-slot inputs are added as needed.
ROW_KEYS = (
    "input_ids",
    "segment_ids",
    "position_ids",
    "branch_ids",
    "slot_index",
    "targets",
    "slot_mask",
    "slot_seq_tokens",
    "slot_sequence",
    "row_sequences",
    "advantages",
)
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class NonFiniteUpdateError(RuntimeError):
    """Too many optimizer steps in a row had a non-finite loss or gradient (``train.max_consecutive_skips``)."""


def _gap(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Mean and max of ``|a - b|`` over the tokens where ``mask`` > 0 (padding may hold anything)."""
    diff = np.where(mask > 0, np.abs(a - b), 0.0)
    return float(diff.sum() / max(mask.sum(), 1.0)), float(diff.max(initial=0.0))


def non_finite_message(consecutive: int, limit: int, loss: float, grad_norm: float) -> str:
    """The one-line :class:`NonFiniteUpdateError` message: how many steps, the last values and what to check."""
    return (
        f"{consecutive} consecutive optimizer steps had a non-finite loss or gradient (last: loss={loss}, "
        f"grad_norm={grad_norm}) and were skipped, params and optimizer state unchanged; "
        f"train.max_consecutive_skips={limit} stops the run here. Check the learning rate "
        "(train.optimizer.lr_schedule.peak_value, warmup, train.optimizer.clip_norm), the data reaching the "
        "learner (NaN/inf scores, advantages or ref/old/rollout log-probs on response tokens), or raise "
        "train.max_consecutive_skips to tolerate longer runs of bad batches"
    )


class JaxLearner:
    """Owns the policy parameters and optimizer state on the learner's device mesh."""

    def __init__(
        self,
        model_path: str,
        optimizer: Mapping[str, Any],
        loss: LossSettings,
        micro_batch_size: int,
        mini_batch_sequences: int | None = None,
        total_optimizer_steps: int = 1,
        warmup_steps: int = 0,
        *,
        mesh: Mapping[str, int] | None = None,
        remat: bool = False,
        compute_dtype: str = "float32",
        devices: list[Any] | None = None,
        max_consecutive_skips: int = 3,
        packing: bool = True,
        pack_width: int | None = None,
        length_bucket: int = 16,
        attention: str = "xla",
        share_prompts: bool = False,
        lora: LoraSpec | None = None,
        lora_seed: int = 0,
    ):
        """``optimizer`` is the ``train.optimizer`` section; ``micro_batch_size`` and
        ``mini_batch_sequences`` (None: the whole batch) count this process's sequences; ``mesh`` the
        ``learner.mesh`` sizes (default: every device on ``dp``) over ``devices`` (default: every device
        of the JAX job); ``max_consecutive_skips`` (``train.max_consecutive_skips``) non-finite optimizer
        steps in a row raise :class:`NonFiniteUpdateError`. ``packing``: pack whole sequences into rows of
        ``pack_width`` tokens (None: the longest sequence of each mini-batch, rounded up to ``length_bucket``);
        ``micro_batch_size`` then counts rows. ``length_bucket``: row widths and response-slot counts are
        rounded up to a multiple of it (``train.length_bucket``). ``attention``: ``xla`` or
        ``dot_product_attention`` (:mod:`relay.models.llama_flax`). ``share_prompts`` (with ``packing``): the
        samples of one prompt share one copy of it in their row (:func:`relay.packing.prompt_pieces`). ``lora``
        (``model.lora``): train LoRA adapters (:mod:`relay.models.lora`, initialised from ``lora_seed``) on the
        frozen base ``params``; only the adapters have gradients and optimizer state."""
        if max_consecutive_skips < 1:
            raise ValueError(f"max_consecutive_skips={max_consecutive_skips}: must be >= 1")
        self.config = LlamaConfig.from_pretrained(model_path)
        self.lora = lora
        self.model = LlamaForCausalLM(
            self.config,
            remat=remat,
            attention=attention,
            scan_layers=True,
            lora_scaling=lora.scaling if lora else 1.0,
            lora_dropout=lora.dropout if lora else 0.0,
        )
        self.lora_seed = lora_seed
        # Full fine-tuning with remat: gradients added into the accumulator layer by layer (one buffer less). One
        # process only: in a two-process JAX job on CPU (gloo) the layer-wise program hung in the update
        # (tests/roles/test_learner_hosts.py); those jobs keep jax.grad until that is understood.
        self.layerwise = remat and lora is None and jax.process_count() == 1
        self.packing, self.pack_width, self.length_bucket = packing, pack_width, length_bucket
        self.share_prompts = share_prompts
        self.mesh = build_mesh(mesh or {"dp": -1}, devices)
        self.compute_dtype = COMPUTE_DTYPES[compute_dtype]
        # Stacked decoder layers (relay.models.layer_stack): the scan reads them as stored, no per-step copy.
        host_params = stack_layers(load_hf_checkpoint(model_path, self.config), self.config.num_hidden_layers)
        self.param_sharding = param_shardings(host_params, self.mesh)
        self.params = place_host_tree(host_params, self.param_sharding)
        # The reference of a full fine-tuning run whose learner computes the reference log-probs: a frozen copy of
        # the initial weights, placed from the host arrays a second time (placing copies: the policy's buffers are
        # donated and overwritten by every update, these never are). With LoRA the base is the reference.
        self.ref_params = None
        if loss.ref_in_learner and lora is None:
            self.ref_params = place_host_tree(host_params, self.param_sharding)
        # With LoRA the adapters are what the optimizer trains; the base params are read, never updated or copied.
        self.adapters, self.adapter_sharding = None, None
        if lora is not None:
            host_adapters = init_adapters(self.config, lora, lora_seed)
            self.adapter_sharding = param_shardings(host_adapters, self.mesh)
            self.adapters = place_host_tree(host_adapters, self.adapter_sharding)
        self.tx, self.schedule = build_optimizer(optimizer, total_optimizer_steps, warmup_steps)
        opt_shape = jax.eval_shape(self.tx.init, self.trainable)
        self.opt_sharding = opt_state_shardings(self.tx, opt_shape, self.trainable_sharding, self.mesh)
        self.opt_state = jax.jit(self.tx.init, out_shardings=self.opt_sharding)(self.trainable)
        self.optimizer_steps = 0  # applied (not skipped) optimizer steps: the LR schedule position
        self.max_consecutive_skips = max_consecutive_skips
        self.consecutive_skips = 0  # skipped optimizer steps in a row, carried across updates
        self.skipped_total = 0
        self.loss_settings = loss
        self.micro_batch_size = micro_batch_size
        self.mini_batch_sequences = mini_batch_sequences
        self._programs: dict[tuple, Callable] = {}
        self.compiles = 0
        self.compile_seconds = 0.0

    @property
    def trainable(self) -> Any:
        """What the optimizer updates: the params in full fine-tuning, the LoRA adapters with ``lora``."""
        return self.params if self.lora is None else self.adapters

    @trainable.setter
    def trainable(self, value: Any) -> None:
        if self.lora is None:
            self.params = value
        else:
            self.adapters = value

    @property
    def trainable_sharding(self) -> Any:
        return self.param_sharding if self.lora is None else self.adapter_sharding

    def _dropout_key(self) -> jax.Array:
        """The PRNG key of the next optimizer step's LoRA dropout: a function of the seed and the optimizer steps
        taken or skipped so far (both in checkpoints), so a resumed run draws the same masks."""
        return jax.random.fold_in(jax.random.PRNGKey(self.lora_seed), self.optimizer_steps + self.skipped_total)

    def _frozen(self) -> dict[str, Any]:
        """The compiled programs' last argument (:func:`relay.learner.train_step.make_accumulate`): the frozen LoRA
        base (``"base"``) and the reference copy (``"reference"``) where this learner has them."""
        frozen = {} if self.lora is None else {"base": self.params}
        return frozen if self.ref_params is None else {**frozen, "reference": self.ref_params}

    def _frozen_sharding(self) -> dict[str, Any]:
        return {k: self.param_sharding for k in self._frozen()}

    # -- batches -----------------------------------------------------------------------------------------

    def _check_batch(self, batch: Mapping[str, np.ndarray]) -> tuple[str, ...]:
        """The per-token inputs the loss reads, after checking that ``batch`` has them (padded layout)."""
        settings = self.loss_settings
        reads_ref = settings.reads_reference or ("ref_log_probs" in batch and not settings.ref_in_learner)
        slot_keys = ("ref_log_probs",) if reads_ref else ()
        slot_keys += (self.loss_settings.old_key,) if self.loss_settings.old_from_batch else ()
        if self.loss_settings.reads_rollout and "rollout_log_probs" not in slot_keys:
            slot_keys += ("rollout_log_probs",)
        missing = [k for k in TRAIN_KEYS + slot_keys if k not in batch]
        if missing:
            raise KeyError(f"learner batch lacks {missing}")
        size = batch["input_ids"].shape[0]
        if size % self.micro_batch_size:
            raise ValueError(f"batch of {size} sequences is not divisible by micro_batch_size={self.micro_batch_size}")
        return slot_keys

    def _agree(self, value: int) -> int:
        """The largest ``value`` over the JAX job's processes (every process must build the same shapes)."""
        if jax.process_count() == 1:
            return value
        return int(np.max(multihost_utils.process_allgather(np.int32(value))))

    def _to_global(
        self, batch: Mapping[str, np.ndarray], prompt_length: int, slot_keys: tuple[str, ...]
    ) -> tuple[dict[str, jax.Array], RowLayout]:
        """This process's padded sequences -> the row layout, stacked ``[accum, micro * processes, ...]``.

        ``accum`` is the most micro-batches the sequences could need (one per row), so it does not change
        between steps; the compiled loop skips the empty ones."""
        sequences = batch["input_ids"].shape[0]
        if self.packing:
            longest = int((np.asarray(batch["attention_mask"]) > 0).sum(1).max(initial=1))
            width = self._agree(max(self.pack_width or 0, round_up(longest, self.length_bucket)))
        else:
            width = None
        rows, layout = layout_rows(
            batch,
            prompt_length,
            packing=self.packing,
            width=width,
            slot_bucket=self.length_bucket,
            row_multiple=self.micro_batch_size,  # a micro-batch computes all its rows, empty ones too
            share_prompts=self.share_prompts,
        )
        slots = self._agree(rows["slot_index"].shape[1])
        capacity = round_up(sequences, self.micro_batch_size)
        slot_arrays = {
            "slot_index",
            "targets",
            "slot_mask",
            "slot_seq_tokens",
            "slot_sequence",
            "advantages",
            *slot_keys,
        }
        padded = {k: _pad_to(rows[k], capacity, slots if k in slot_arrays else None) for k in ROW_KEYS + slot_keys}
        stacked = stack_micro_batches(padded, self.micro_batch_size)
        arrays = {
            k: jax.make_array_from_process_local_data(batch_sharding(self.mesh, v.ndim), v) for k, v in stacked.items()
        }
        return arrays, layout

    def _to_local(self, log_probs: jax.Array, layout: RowLayout) -> np.ndarray:
        """Global per-slot ``[accum, micro * processes, K]`` -> this process's sequences ``[N, R]``."""
        if jax.process_count() > 1:
            log_probs = multihost_utils.global_array_to_host_local_array(log_probs, self.mesh, P(None, DATA_AXES))
        local = np.asarray(log_probs)
        return slots_to_sequences(local.reshape(-1, local.shape[-1]), layout)

    # -- compiled programs -------------------------------------------------------------------------------

    def _program(self, kind: str, batch: Mapping[str, jax.Array]) -> Callable:
        """The compiled ``kind`` (``step`` or ``grads``) program for these shapes, compiled once."""
        key = (kind, tuple(sorted((k, v.shape) for k, v in batch.items())))
        if key in self._programs:
            return self._programs[key]
        batch_sh = {k: batch_sharding(self.mesh, v.ndim) for k, v in batch.items()}
        rep, rows = replicated(self.mesh), batch_sharding(self.mesh, 3)
        trained, frozen_sh = self.trainable_sharding, self._frozen_sharding()
        if kind == "step":
            fn = make_train_step(self.model, self.tx, self.loss_settings, self.compute_dtype, self.layerwise)
            jitted = jax.jit(
                fn,
                in_shardings=(trained, self.opt_sharding, batch_sh, rep, frozen_sh),
                out_shardings=(trained, self.opt_sharding, rep, rows, rep, rep),
                donate_argnums=(0, 1),  # frozen weights (LoRA base, reference) are not donated: they outlive the step
            )
            args = (self.trainable, self.opt_state, batch, self._dropout_key(), self._frozen())
        else:
            fn = make_accumulate(self.model, self.loss_settings, self.compute_dtype, self.layerwise)
            jitted = jax.jit(fn, in_shardings=(trained, batch_sh, rep, frozen_sh), out_shardings=(trained, rep, rows))
            args = (self.trainable, batch, self._dropout_key(), self._frozen())
        start = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        release_free_heap()  # the compiler's freed memory, before the step's temporaries land on top of it
        self.compile_seconds += time.perf_counter() - start
        self.compiles += 1
        self._programs[key] = compiled
        return compiled

    # -- the update --------------------------------------------------------------------------------------

    def gradients(
        self, batch: Mapping[str, np.ndarray], prompt_length: int
    ) -> tuple[Any, dict[str, float], np.ndarray]:
        """Gradients of ``batch``'s loss accumulated over micro-batches (params unchanged), the summed
        metrics, and this process's log-probs ``[B, R]`` under the current params."""
        slot_keys = self._check_batch(batch)
        global_batch, layout = self._to_global(batch, prompt_length, slot_keys)
        program = self._program("grads", global_batch)
        grads, sums, log_probs = program(self.trainable, global_batch, self._dropout_key(), self._frozen())
        return grads, {k: float(v) for k, v in sums.items()}, self._to_local(log_probs, layout)

    def update(self, batch: Mapping[str, np.ndarray], prompt_length: int, epochs: int = 1) -> dict[str, float]:
        """``epochs`` passes over ``batch`` (this process's sequences of the training step), one optimizer
        step per mini-batch. Loss metrics (and ``actor/grad_norm``) are means over the update's applied
        optimizer steps, every epoch and mini-batch (a PPO clip fraction of the first mini-batch alone is 0: its
        ratios are 1); a skipped step's non-finite values are left out unless every step was skipped. The
        log-prob gaps use the first epoch's log-probs of every row (the weights of the mini-batch's optimizer step).

        A step with a non-finite loss or gradient leaves params and optimizer state unchanged and does not
        count in ``optimizer_steps``; ``learner/skipped_steps`` counts them in this update. A mini-batch
        skipped in the first epoch is not run again in later epochs (its non-finite inputs would only be
        skipped again, so one bad batch counts once whatever ``epochs``). Raises
        :class:`NonFiniteUpdateError` when ``max_consecutive_skips`` steps in a row (across updates) were
        skipped."""
        slot_keys = self._check_batch(batch)
        size = batch["input_ids"].shape[0]
        mini = self.mini_batch_sequences or size
        if size % mini or mini % self.micro_batch_size:
            raise ValueError(
                f"batch of {size} sequences does not split into mini-batches of {mini} "
                f"made of micro-batches of {self.micro_batch_size}"
            )
        start, compile_before = time.perf_counter(), self.compile_seconds
        learner_log_probs: list[np.ndarray] = []
        applied_sums: list[dict[str, float]] = []  # each applied optimizer step's metrics
        applied_norms: list[float] = []
        last_sums: dict[str, float] = {}
        skipped_steps = 0
        skipped_first_epoch: set[int] = set()
        computed = real = sequence_tokens = 0
        keys = TRAIN_KEYS + slot_keys
        for epoch in range(epochs):
            for lo in range(0, size, mini):
                if lo in skipped_first_epoch:
                    continue
                part = {k: batch[k][lo : lo + mini] for k in keys}
                global_batch, layout = self._to_global(part, prompt_length, slot_keys)
                if epoch == 0:
                    computed, real = computed + layout.computed_tokens, real + layout.real_tokens
                    sequence_tokens += layout.sequence_tokens
                step = self._program("step", global_batch)
                lr = float(self.schedule(self.optimizer_steps))
                self.trainable, self.opt_state, sums, log_probs, grad_norm, skipped = step(
                    self.trainable, self.opt_state, global_batch, self._dropout_key(), self._frozen()
                )
                if epoch == 0:
                    learner_log_probs.append(self._to_local(log_probs, layout))
                last_sums = {k: float(v) for k, v in sums.items()}
                if not float(skipped):
                    applied_sums.append(last_sums)
                    applied_norms.append(float(grad_norm))
                if float(skipped):  # replicated scalar: every process takes the same branch
                    skipped_steps += 1
                    if epoch == 0:
                        skipped_first_epoch.add(lo)
                    self.skipped_total += 1
                    self.consecutive_skips += 1
                    if self.consecutive_skips >= self.max_consecutive_skips:
                        raise NonFiniteUpdateError(
                            non_finite_message(
                                self.consecutive_skips,
                                self.max_consecutive_skips,
                                float(sums["loss"]),
                                float(grad_norm),
                            )
                        )
                else:
                    self.optimizer_steps += 1
                    self.consecutive_skips = 0
        jax.block_until_ready(self.trainable)
        release_free_heap()
        seconds = time.perf_counter() - start
        compile_seconds = self.compile_seconds - compile_before
        mask = batch["response_mask"]
        all_log_probs = np.concatenate(learner_log_probs, axis=0)
        reported = applied_sums or [last_sums]  # every step skipped: the last one's non-finite values show why
        metrics = {f"actor/{k}": float(np.mean([s[k] for s in reported])) for k in reported[0]}
        metrics["actor/grad_norm"] = float(np.mean(applied_norms)) if applied_norms else float(grad_norm)
        metrics["actor/lr"] = lr
        metrics["actor/optimizer_steps"] = float(self.optimizer_steps)
        metrics["learner/skipped_steps"] = float(skipped_steps)
        metrics["learner/skipped_total"] = float(self.skipped_total)
        metrics["learner/consecutive_skips"] = float(self.consecutive_skips)
        metrics["learner/ref_forward"] = float(self.loss_settings.ref_in_learner)  # the reference forward ran here
        metrics["timing/update_compute"] = seconds
        metrics["learner/compile_seconds"] = compile_seconds
        metrics["learner/compiles_count"] = float(self.compiles)
        tokens = float(batch["attention_mask"].sum()) * epochs
        metrics["throughput/learner_tokens_per_s"] = tokens / max(seconds - compile_seconds, 1e-9)
        # Padding share of the token positions the trunk computed, and what the padded layout would have had.
        metrics["batch/padding_share"] = 1.0 - real / max(computed, 1)
        metrics["batch/padding_share_unpacked"] = 1.0 - sequence_tokens / max(batch["attention_mask"].size, 1)
        # Tokens of the sequences not computed because their group shares one copy of its prompt.
        metrics["batch/shared_prompt_share"] = 1.0 - real / max(sequence_tokens, 1)
        for name, key in (("rollout", "rollout_log_probs"), ("actor", "old_log_probs")):  # padded [N, R]
            if key in batch:
                gap_mean, gap_max = _gap(batch[key], all_log_probs, mask)
                metrics[f"logprob_gap/{name}_vs_learner_mean"] = gap_mean
                metrics[f"logprob_gap/{name}_vs_learner_max"] = gap_max
        return metrics

    def export_hf(self) -> dict[str, np.ndarray]:
        """Current weights under HF names as host arrays; with LoRA the base with the adapters merged in
        (``W + s B A``, new arrays for the adapted weights only; a LoRA sync and export send
        :meth:`export_adapters` instead). On several processes every process must call it (the sharded params are
        gathered with a collective)."""
        params = _host_tree(self.params)
        if self.lora is not None:
            params = merged_weights(params, _host_tree(self.adapters), self.lora.scaling)
        return params_to_hf(unstack_layers(params))

    def export_adapters(self) -> dict[str, np.ndarray]:
        """The LoRA adapters under PEFT's per-layer names (:func:`relay.models.lora.peft_state_dict`), host
        arrays; every process must call it."""
        if self.lora is None:
            raise ValueError("export_adapters: this learner trains every weight (model.lora is null)")
        return peft_state_dict(_host_tree(self.adapters))


def _host_tree(tree: Any) -> Any:
    """``tree``'s leaves as host arrays, gathered from every process when there are several (a collective)."""
    if jax.process_count() > 1:
        return multihost_utils.process_allgather(tree, tiled=True)
    return tree  # numpy views of the CPU arrays where the leaves are read (unstack_layers, merged_weights)


def _pad_to(array: np.ndarray, rows: int, slots: int | None) -> np.ndarray:
    """``array`` ``[r, ...]`` with zero rows appended up to ``rows``, and a per-slot array ``[r, k]`` also
    zero-widened to ``slots`` columns (padding slots carry ``slot_mask`` 0)."""
    pad = [(0, rows - array.shape[0])] + [(0, 0)] * (array.ndim - 1)
    if slots is not None:
        pad[1] = (0, slots - array.shape[1])
    return np.pad(array, pad)
