"""This process's padded sequences in and out of the global row-layout arrays the compiled programs read.

:func:`loss_inputs` checks that a padded batch has the fields the update and its loss read.

:meth:`RowBatching.to_global` rewrites a process's padded sequences into the row layout of :mod:`relay.packing`,
pads the rows to a whole number of micro-batches and the per-slot arrays to one slot count, stacks them
``[accum, micro, ...]`` and assembles the global arrays of the learner's mesh (every process's rows
concatenated along the row axis of each micro-batch). :meth:`RowBatching.to_local` takes the per-slot log-probs
the programs return back to this process's sequences ``[N, R]``. Row widths and slot counts are agreed over the
JAX job's processes, so every process builds the same shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from relay.learner.grpo_loss import LossSettings
from relay.learner.inputs import TRAIN_KEYS
from relay.learner.sharding import DATA_AXES, batch_sharding
from relay.learner.train_step import stack_micro_batches
from relay.packing import RowLayout, layout_rows, round_up, slots_to_sequences

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
# The row-layout arrays with one column per response slot (widened to the agreed slot count).
SLOT_ARRAYS = ("slot_index", "targets", "slot_mask", "slot_seq_tokens", "slot_sequence", "advantages")


@dataclass(frozen=True)
class RowBatching:
    """How the learner lays sequences out in rows: ``packing`` whole sequences into rows of ``pack_width`` tokens
    (None: the longest sequence, rounded up to ``length_bucket``) or one padded sequence per row; slot counts
    rounded up to ``length_bucket``; ``micro_batch_size`` rows a micro-batch; ``share_prompts``: a group's
    samples share one copy of its prompt (:func:`relay.packing.prompt_pieces`)."""

    mesh: Mesh
    micro_batch_size: int
    packing: bool
    pack_width: int | None
    length_bucket: int
    share_prompts: bool

    def to_global(
        self, batch: Mapping[str, np.ndarray], prompt_length: int, slot_keys: tuple[str, ...]
    ) -> tuple[dict[str, jax.Array], RowLayout]:
        """This process's padded sequences -> the row layout, stacked ``[accum, micro * processes, ...]``.

        ``accum`` is the most micro-batches the sequences could need (one per row), so it does not change
        between steps; the compiled loop skips the empty ones."""
        sequences = batch["input_ids"].shape[0]
        if self.packing:
            longest = int((np.asarray(batch["attention_mask"]) > 0).sum(1).max(initial=1))
            width = agree(max(self.pack_width or 0, round_up(longest, self.length_bucket)))
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
        slots = agree(rows["slot_index"].shape[1])
        capacity = round_up(sequences, self.micro_batch_size)
        slot_arrays = {*SLOT_ARRAYS, *slot_keys}
        padded = {k: pad_rows(rows[k], capacity, slots if k in slot_arrays else None) for k in ROW_KEYS + slot_keys}
        stacked = stack_micro_batches(padded, self.micro_batch_size)
        arrays = {
            k: jax.make_array_from_process_local_data(batch_sharding(self.mesh, v.ndim), v) for k, v in stacked.items()
        }
        return arrays, layout

    def to_local(self, log_probs: jax.Array, layout: RowLayout) -> np.ndarray:
        """Global per-slot ``[accum, micro * processes, K]`` -> this process's sequences ``[N, R]``."""
        if jax.process_count() > 1:
            log_probs = multihost_utils.global_array_to_host_local_array(log_probs, self.mesh, P(None, DATA_AXES))
        local = np.asarray(log_probs)
        return slots_to_sequences(local.reshape(-1, local.shape[-1]), layout)


def loss_inputs(batch: Mapping[str, np.ndarray], settings: LossSettings, micro_batch_size: int) -> tuple[str, ...]:
    """The per-token inputs the loss reads (reference, old and rollout log-probs, as ``settings`` says), after
    checking that the padded ``batch`` has them and the :data:`TRAIN_KEYS`, and splits into micro-batches."""
    reads_ref = settings.reads_reference or ("ref_log_probs" in batch and not settings.ref_in_learner)
    slot_keys = ("ref_log_probs",) if reads_ref else ()
    slot_keys += (settings.old_key,) if settings.old_from_batch else ()
    if settings.reads_rollout and "rollout_log_probs" not in slot_keys:
        slot_keys += ("rollout_log_probs",)
    missing = [k for k in TRAIN_KEYS + slot_keys if k not in batch]
    if missing:
        raise KeyError(f"learner batch lacks {missing}")
    size = batch["input_ids"].shape[0]
    if size % micro_batch_size:
        raise ValueError(f"batch of {size} sequences is not divisible by micro_batch_size={micro_batch_size}")
    return slot_keys


def agree(value: int) -> int:
    """The largest ``value`` over the JAX job's processes (every process must build the same shapes)."""
    if jax.process_count() == 1:
        return value
    return int(np.max(multihost_utils.process_allgather(np.int32(value))))


def pad_rows(array: np.ndarray, rows: int, slots: int | None) -> np.ndarray:
    """``array`` ``[r, ...]`` with zero rows appended up to ``rows``, and a per-slot array ``[r, k]`` also
    zero-widened to ``slots`` columns (padding slots carry ``slot_mask`` 0)."""
    pad = [(0, rows - array.shape[0])] + [(0, 0)] * (array.ndim - 1)
    if slots is not None:
        pad[1] = (0, slots - array.shape[1])
    return np.pad(array, pad)
