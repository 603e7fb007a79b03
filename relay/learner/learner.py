"""The JAX learner: flax params + an optax optimizer on a device mesh, the GRPO update of a training step.

The update runs at three levels. The global step (:meth:`JaxLearner.update`) takes a training step's batch (this
process's rows) through ``ppo_epochs`` passes of its mini-batches. The mini-batch step
(:meth:`JaxLearner._mini_batch_step`) rewrites a mini-batch into the row layout of :mod:`relay.packing`
(``packing=True``: whole sequences packed into rows of ``pack_width`` tokens, so no FLOPs go to padding;
``False``: one padded sequence per row; :mod:`relay.learner.row_batches`), sends it to the devices as
``[accum, micro, ...]`` and runs one compiled optimizer step (:mod:`relay.learner.train_step`), whose loop over
the micro-batches that hold rows (:func:`relay.learner.train_step.micro_batch_step`) accumulates gradients
before the optimizer applies them. Shapes come from the fixed row width and a few slot-count buckets, and the
compiled programs are cached per shape (``learner/compiles``, ``learner/compile_seconds``), so a new step rarely
compiles.

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

from relay.learner.grpo_loss import LossSettings
from relay.learner.host_memory import release_free_heap
from relay.learner.inputs import TRAIN_KEYS
from relay.learner.loss_pass import make_loss_pass
from relay.learner.optimizer import build_optimizer
from relay.learner.peers import wait_for_peers
from relay.learner.reference_pass import make_reference_pass, step_settings
from relay.learner.row_batches import RowBatching, loss_inputs
from relay.learner.sharding import (
    batch_sharding,
    build_mesh,
    opt_state_shardings,
    param_shardings,
    place_host_tree,
    replicated,
)
from relay.learner.train_step import make_train_step
from relay.learner.update_metrics import (
    StepOutcome,
    UpdateTally,
    log_prob_gap_metrics,
    loss_metrics,
    padding_metrics,
)
from relay.learner.weight_export import hf_weights, peft_adapters
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.models.hf_params import load_hf_checkpoint
from relay.models.layer_stack import stack_layers
from relay.models.llama_config import LlamaConfig
from relay.models.llama_flax import LlamaForCausalLM
from relay.models.lora import init_adapters
from relay.models.lora_spec import LoraSpec

COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


class NonFiniteUpdateError(RuntimeError):
    """Too many optimizer steps in a row had a non-finite loss or gradient (``train.max_consecutive_skips``)."""


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


def build_model(config: LlamaConfig, lora: LoraSpec | None, remat: bool, attention: str) -> LlamaForCausalLM:
    """The flax Llama over stacked decoder layers (one scan; :mod:`relay.models.layer_stack`), with the LoRA
    adapters' scaling and dropout when ``lora`` is set."""
    return LlamaForCausalLM(
        config,
        remat=remat,
        attention=attention,
        scan_layers=True,
        lora_scaling=lora.scaling if lora else 1.0,
        lora_dropout=lora.dropout if lora else 0.0,
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
        peer_timeout_s: float | None = None,
    ):
        """``optimizer`` is the ``train.optimizer`` section; ``micro_batch_size`` and
        ``mini_batch_sequences`` (None: the whole batch) count this process's sequences; ``mesh`` the
        ``learner.mesh`` sizes (default: every device on ``dp``) over ``devices`` (default: every device
        of the JAX job); ``max_consecutive_skips`` (``train.max_consecutive_skips``) non-finite optimizer
        steps in a row raise :class:`NonFiniteUpdateError`. ``packing``: pack whole sequences into rows of
        ``pack_width`` tokens (None: the longest sequence of each mini-batch, rounded up to ``length_bucket``);
        ``micro_batch_size`` then counts rows. ``length_bucket``: row widths and response-slot counts are
        rounded up to a multiple of it (``train.length_bucket``). ``attention``: an implementation of
        :mod:`relay.models.attention` (``train.attention`` resolved). ``share_prompts`` (with ``packing``): the
        samples of one prompt share one copy of it in their row (:func:`relay.packing.prompt_pieces`). ``lora``
        (``model.lora``): train LoRA adapters (:mod:`relay.models.lora`, initialised from ``lora_seed``) on the
        frozen base ``params``; only the adapters have gradients and optimizer state."""
        if max_consecutive_skips < 1:
            raise ValueError(f"max_consecutive_skips={max_consecutive_skips}: must be >= 1")
        self.config = LlamaConfig.from_pretrained(model_path)
        self.lora, self.lora_seed = lora, lora_seed
        self.model = build_model(self.config, lora, remat, attention)
        # Full fine-tuning with remat: gradients added into the accumulator layer by layer (one buffer less).
        self.layerwise = remat and lora is None
        self.mesh = build_mesh(mesh or {"dp": -1}, devices)
        self.rows = RowBatching(self.mesh, micro_batch_size, packing, pack_width, length_bucket, share_prompts)
        self.compute_dtype = COMPUTE_DTYPES[compute_dtype]
        self._place_params(model_path, with_reference=loss.ref_in_learner and lora is None)
        self._place_adapters()
        self._init_optimizer(optimizer, total_optimizer_steps, warmup_steps)
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
        self.peer_timeout_s = peer_timeout_s

    def _place_params(self, model_path: str, with_reference: bool) -> None:
        """The checkpoint's params on the mesh, its decoder layers stacked (:mod:`relay.models.layer_stack`: the
        scan reads them as stored, no per-step copy). ``with_reference``: the reference of a full fine-tuning run
        whose learner computes the reference log-probs, a frozen copy of the initial weights placed from the host
        arrays a second time (placing copies: the policy's buffers are donated and overwritten by every update,
        these never are). With LoRA the base is the reference and there is no copy."""
        host_params = stack_layers(load_hf_checkpoint(model_path, self.config), self.config.num_hidden_layers)
        self.param_sharding = param_shardings(host_params, self.mesh)
        self.params = place_host_tree(host_params, self.param_sharding)
        self.ref_params = place_host_tree(host_params, self.param_sharding) if with_reference else None

    def _place_adapters(self) -> None:
        """With LoRA, fresh adapters on the mesh: what the optimizer trains (the base params are read, never updated
        or copied); None without."""
        self.adapters, self.adapter_sharding = None, None
        if self.lora is not None:
            host_adapters = init_adapters(self.config, self.lora, self.lora_seed)
            self.adapter_sharding = param_shardings(host_adapters, self.mesh)
            self.adapters = place_host_tree(host_adapters, self.adapter_sharding)

    def _init_optimizer(self, optimizer: Mapping[str, Any], total_steps: int, warmup_steps: int) -> None:
        """The optimizer and its learning-rate schedule, and its state for the trainable tree, sharded like it."""
        self.tx, self.schedule = build_optimizer(optimizer, total_steps, warmup_steps)
        opt_shape = jax.eval_shape(self.tx.init, self.trainable)
        self.opt_sharding = opt_state_shardings(self.tx, opt_shape, self.trainable_sharding, self.mesh)
        self.opt_state = jax.jit(self.tx.init, out_shardings=self.opt_sharding)(self.trainable)

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

    def _mini_batch_size(self, size: int) -> int:
        """Sequences per optimizer step for a batch of ``size``: ``mini_batch_sequences`` or the whole batch, which
        must split into whole mini-batches of whole micro-batches."""
        mini = self.mini_batch_sequences or size
        if size % mini or mini % self.micro_batch_size:
            raise ValueError(
                f"batch of {size} sequences does not split into mini-batches of {mini} "
                f"made of micro-batches of {self.micro_batch_size}"
            )
        return mini

    # -- compiled programs -------------------------------------------------------------------------------

    def _program(self, kind: str, batch: Mapping[str, jax.Array]) -> Callable:
        """The compiled ``kind`` (``step``, ``reference`` or ``loss``) program for these shapes, compiled once."""
        key = (kind, tuple(sorted((k, v.shape) for k, v in batch.items())))
        if key in self._programs:
            return self._programs[key]
        batch_sh = {k: batch_sharding(self.mesh, v.ndim) for k, v in batch.items()}
        rep, rows = replicated(self.mesh), batch_sharding(self.mesh, 3)
        trained, frozen_sh = self.trainable_sharding, self._frozen_sharding()
        settings = step_settings(self.loss_settings)  # the reference log-probs come in the batch (_with_reference)
        if kind == "reference":
            fn = make_reference_pass(self.model, self.loss_settings, self.compute_dtype)
            jitted = jax.jit(fn, in_shardings=(frozen_sh, batch_sh), out_shardings=rows)
            args = (self._frozen(), batch)
        elif kind == "step":
            fn = make_train_step(self.model, self.tx, settings, self.compute_dtype, self.layerwise)
            jitted = jax.jit(
                fn,
                in_shardings=(trained, self.opt_sharding, batch_sh, rep, frozen_sh),
                out_shardings=(trained, self.opt_sharding, rep, rows, rep, rep),
                donate_argnums=(0, 1),  # frozen weights (LoRA base, reference) are not donated: they outlive the step
            )
            args = (self.trainable, self.opt_state, batch, self._dropout_key(), self._frozen())
        elif kind == "loss":
            fn = make_loss_pass(self.model, settings, self.compute_dtype)
            jitted = jax.jit(fn, in_shardings=(trained, frozen_sh, batch_sh), out_shardings=rep)
            args = (self.trainable, self._frozen(), batch)
        else:
            raise ValueError(f"program kind {kind!r}: step, reference or loss")
        start = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        release_free_heap()  # the compiler's freed memory, before the step's temporaries land on top of it
        self.compile_seconds += time.perf_counter() - start
        self.compiles += 1
        # Several hosts: the program's first run builds its gloo communicators, whose rendezvous allows ~30 s
        # between hosts; compiling takes each a different time (relay.learner.peers).
        wait_for_peers(f"relay-learner-compiled-{self.compiles}-{kind}", self.peer_timeout_s)
        self._programs[key] = compiled
        return compiled

    def _with_reference(self, global_batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """``global_batch`` with the learner's reference log-probs as ``ref_log_probs`` when it computes them: a
        program of its own, finished before the step that reads them (:mod:`relay.learner.reference_pass`)."""
        if not self.loss_settings.ref_in_learner:
            return global_batch
        reference = self._program("reference", global_batch)(self._frozen(), global_batch)
        return {**global_batch, "ref_log_probs": reference}

    # -- the update --------------------------------------------------------------------------------------

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
        slot_keys = loss_inputs(batch, self.loss_settings, self.micro_batch_size)
        size = batch["input_ids"].shape[0]
        mini = self._mini_batch_size(size)
        start, compile_before = time.perf_counter(), self.compile_seconds
        tally = UpdateTally()
        skipped_first_epoch: set[int] = set()  # offsets of the mini-batches skipped in the first epoch
        for epoch in range(epochs):
            for lo in range(0, size, mini):
                if lo in skipped_first_epoch:
                    continue
                part = {k: batch[k][lo : lo + mini] for k in TRAIN_KEYS + slot_keys}
                skipped = self._mini_batch_step(part, prompt_length, slot_keys, tally, first_epoch=epoch == 0)
                if skipped and epoch == 0:
                    skipped_first_epoch.add(lo)
        jax.block_until_ready(self.trainable)
        release_free_heap()
        seconds = time.perf_counter() - start
        return self._update_metrics(tally, batch, epochs, seconds, self.compile_seconds - compile_before)

    def _mini_batch_step(
        self,
        part: Mapping[str, np.ndarray],
        prompt_length: int,
        slot_keys: tuple[str, ...],
        tally: UpdateTally,
        first_epoch: bool,
    ) -> bool:
        """One optimizer step on the mini-batch ``part``: its rows laid out and placed on the mesh, the compiled
        step run, its outcome added to ``tally`` (in the first epoch with the row layout's token counts and the
        learner's log-probs), then the skip bookkeeping (:meth:`_count_step`). Returns whether it was skipped."""
        global_batch, layout = self.rows.to_global(part, prompt_length, slot_keys)
        global_batch = self._with_reference(global_batch)
        program = self._program("step", global_batch)
        lr = float(self.schedule(self.optimizer_steps))
        self.trainable, self.opt_state, sums, log_probs, grad_norm, skipped = program(
            self.trainable, self.opt_state, global_batch, self._dropout_key(), self._frozen()
        )
        if first_epoch:
            tally.add_layout(layout, self.rows.to_local(log_probs, layout))
        # skipped is a replicated scalar: every process takes the same branches.
        step = StepOutcome({k: float(v) for k, v in sums.items()}, float(grad_norm), lr, bool(float(skipped)))
        tally.add_step(step)
        self._count_step(step)
        return step.skipped

    def _count_step(self, step: StepOutcome) -> None:
        """An applied step advances ``optimizer_steps`` (the LR schedule position) and ends a run of skips; a
        skipped one extends it, and raises :class:`NonFiniteUpdateError` at ``max_consecutive_skips``."""
        if not step.skipped:
            self.optimizer_steps += 1
            self.consecutive_skips = 0
            return
        self.skipped_total += 1
        self.consecutive_skips += 1
        if self.consecutive_skips >= self.max_consecutive_skips:
            raise NonFiniteUpdateError(
                non_finite_message(
                    self.consecutive_skips, self.max_consecutive_skips, step.sums["loss"], step.grad_norm
                )
            )

    def _update_metrics(
        self, tally: UpdateTally, batch: Mapping[str, np.ndarray], epochs: int, seconds: float, compile_seconds: float
    ) -> dict[str, float]:
        """The update's metrics: the loss means (``actor/*``), this learner's step and skip counters
        (``learner/*``), timing and throughput, the padding shares (``batch/*``) and the log-prob gaps."""
        metrics = loss_metrics(tally)
        metrics[pm.ACTOR_OPTIMIZER_STEPS] = float(self.optimizer_steps)
        metrics[pm.LEARNER_SKIPPED_STEPS] = float(tally.skipped_steps)
        metrics[pm.LEARNER_SKIPPED_TOTAL] = float(self.skipped_total)
        metrics[pm.LEARNER_CONSECUTIVE_SKIPS] = float(self.consecutive_skips)
        metrics[pm.LEARNER_REF_FORWARD] = float(self.loss_settings.ref_in_learner)  # the reference forward ran here
        metrics[sm.TIMING_ROLE_COMPUTE.format(role="update")] = seconds
        metrics[pm.LEARNER_COMPILE_SECONDS] = compile_seconds
        metrics[pm.LEARNER_COMPILES] = float(self.compiles)
        tokens = float(batch["attention_mask"].sum()) * epochs
        metrics[sm.THROUGHPUT_LEARNER] = tokens / max(seconds - compile_seconds, 1e-9)
        metrics.update(padding_metrics(tally, batch["attention_mask"]))
        if self.loss_settings.objective != "sft":  # a trace's log-probs are zeros: no sampler to compare with
            metrics.update(log_prob_gap_metrics(batch, tally.log_probs))
        return metrics

    def evaluate_loss(self, batch: Mapping[str, np.ndarray], prompt_length: int) -> dict[str, float]:
        """The loss metrics of ``batch`` (padded, as :meth:`update` takes it) under the current weights, without an
        update: ``{"loss": ..., <the objective's metrics>}`` as token means over the whole batch (a warm start's
        validation loss). The batch is one program call, so it must fit the learner's memory like a mini-batch."""
        slot_keys = loss_inputs(batch, self.loss_settings, self.micro_batch_size)
        global_batch, _ = self.rows.to_global(batch, prompt_length, slot_keys)
        sums = self._program("loss", global_batch)(self.trainable, self._frozen(), global_batch)
        return {k: float(v) for k, v in sums.items()}

    def export_hf(self, dtype: str = "float32") -> dict[str, np.ndarray]:
        """Current weights under HF names as host arrays of ``dtype`` (:func:`relay.learner.weight_export.hf_weights`:
        with LoRA the base with the adapters merged in). On several processes every process must call it (the
        sharded params are gathered with a collective)."""
        return hf_weights(self.params, self.adapters, self.lora, dtype)

    def export_adapters(self) -> dict[str, np.ndarray]:
        """The LoRA adapters under PEFT's per-layer names (:func:`relay.learner.weight_export.peft_adapters`), host
        arrays; every process must call it."""
        if self.lora is None:
            raise ValueError("export_adapters: this learner trains every weight (model.lora is null)")
        return peft_adapters(self.adapters)
