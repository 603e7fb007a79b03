"""The learner's token layout: whole sequences packed into fixed-width rows, loss on response "slots".

A rollout arrives padded: row ``i`` is ``[prompt left-padded to P | response right-padded to R]``. Computing
on that layout spends FLOPs on every pad. :func:`layout_rows` rewrites a batch as

- ``input_ids``, ``segment_ids``, ``position_ids`` ``[rows, W]``: sequences' real tokens (prompt then
  response) laid end to end in rows of ``W`` tokens; ``segment_ids`` numbers the sequences of a row
  ``1, 2, ...`` and is 0 on the pad tail, ``position_ids`` restart at 0 for every sequence (so RoPE sees the
  same positions as in the padded row);
- ``slot_index``, ``targets`` and the per-token inputs ``[rows, K]``: one "slot" per response token. Slot
  ``k`` of a row predicts token ``targets[k]`` from the hidden state at ``slot_index[k]`` (the position just
  before that token), so the ``[hidden, vocab]`` LM head runs on the ``K`` slots only, never on prompts;
- ``slot_mask`` (1 on real slots), ``slot_seq_tokens`` (the response length of the slot's sequence, for
  ``seq-mean-token-mean``) ``[rows, K]`` and ``row_sequences`` ``[rows]`` (sequences in the row).

With ``packing=False`` every sequence gets a row of its own (``W = P + R``, ``K = R``): the padded layout,
written in the same terms, so the packed and the padded learner share one compiled loss.

Rows are filled first-fit by decreasing length (each sequence, longest first, goes into the first row with
room), which is within 22% of the fewest rows possible.

Worked example: ``W = 8``, two sequences of (prompt, response) real lengths (3, 2) and (2, 1)::

    input_ids    = [p p p r r q q s]      segment_ids  = [1 1 1 1 1 2 2 2]
    position_ids = [0 1 2 3 4 0 1 2]
    slots:   slot_index = [2 3 6]   targets = [r r s]   slot_seq_tokens = [2 2 1]

The first response token of sequence 1 (position 3) is predicted from position 2, its last prompt token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

SLOT_INPUTS = ("advantages", "ref_log_probs", "old_log_probs", "rollout_log_probs")


@dataclass(frozen=True)
class RowLayout:
    """Where each sequence of the padded batch went: to unpack per-slot results back to ``[N, R]``."""

    row: np.ndarray  # [N] the row holding sequence i
    first_slot: np.ndarray  # [N] its first response slot in that row
    response_tokens: np.ndarray  # [N] its response length (slots used)
    response_width: int  # R of the padded batch
    real_tokens: int  # prompt + response tokens of every sequence
    computed_tokens: int  # rows x W: the token positions the trunk computes

    @property
    def padding_share(self) -> float:
        """Padded token positions / token positions computed (0 = every computed position is a real token)."""
        return 1.0 - self.real_tokens / max(self.computed_tokens, 1)


def round_up(value: int, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple`` (at least ``multiple``). ``round_up(65, 64) == 128``."""
    return max(multiple, -(-value // multiple) * multiple)


def first_fit_decreasing(lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bins of ``width`` for items of ``lengths``: ``(row_of, offset_of, fill)``.

    Items go longest first (ties in index order), each into the first row with room, at that row's
    current fill. An item of length 0 is not placed (row -1, offset 0).

    Example: ``first_fit_decreasing([5, 3, 2, 4], 6)`` places 5 in row 0, 4 in row 1, 3 in row 2 and 2 after
    the 4 in row 1: ``row_of = [0, 2, 1, 1]``, ``offset_of = [0, 0, 4, 0]``, ``fill = [5, 6, 3]``.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and int(lengths.max()) > width:
        raise ValueError(f"a sequence of {int(lengths.max())} tokens does not fit a packed row of {width}")
    row_of = np.full(lengths.shape, -1, np.int64)
    offset_of = np.zeros(lengths.shape, np.int64)
    fill = np.zeros(len(lengths), np.int64)  # at most one row per item
    rows = 0
    for i in np.argsort(-lengths, kind="stable"):
        n = int(lengths[i])
        if n == 0:
            continue
        room = np.nonzero(fill[:rows] + n <= width)[0]
        r = int(room[0]) if room.size else rows
        rows = max(rows, r + 1)
        row_of[i], offset_of[i] = r, fill[r]
        fill[r] += n
    return row_of, offset_of, fill[:rows]


def layout_rows(
    batch: Mapping[str, np.ndarray],
    prompt_length: int,
    *,
    packing: bool,
    width: int | None = None,
    slot_bucket: int = 1,
    row_multiple: int = 1,
) -> tuple[dict[str, np.ndarray], RowLayout]:
    """Rewrite a padded batch (``input_ids``/``attention_mask`` ``[N, P+R]``, ``response_mask`` and the
    :data:`SLOT_INPUTS` present ``[N, R]``) into the row layout described in the module docstring.

    ``width``: packed row width (``packing=True``; default the longest sequence); ``slot_bucket``: ``K``
    is rounded up to a multiple of it (fewer distinct shapes, fewer compiles); ``row_multiple``: empty rows
    are appended until the row count divides by it (rows with ``segment_ids`` 0 and no slots).
    """
    ids = np.asarray(batch["input_ids"])
    attn = np.asarray(batch["attention_mask"]) > 0
    resp = np.asarray(batch["response_mask"]) > 0
    n, total = ids.shape
    r_width = total - prompt_length
    prompt_lens = attn[:, :prompt_length].sum(1)
    resp_lens = resp.sum(1)
    real = attn.sum(1)
    if np.any(real != prompt_lens + resp_lens) or np.any(prompt_lens < 1):
        raise ValueError("each row must be [real prompt (>= 1 token) | real response], attention_mask covering both")
    if packing:
        width = width or int(real.max(initial=1))
        row_of, offset_of, _ = first_fit_decreasing(real, width)
        groups = [sorted(np.nonzero(row_of == r)[0], key=lambda i: offset_of[i]) for r in range(int(row_of.max()) + 1)]
    else:
        width = total
        groups = [[i] for i in range(n)]
    rows = round_up(len(groups), row_multiple) if groups else row_multiple
    slots = round_up(int(max((resp_lens[g].sum() for g in groups), default=1)), slot_bucket)
    out = {
        "input_ids": np.zeros((rows, width), np.int32),
        "segment_ids": np.zeros((rows, width), np.int32),
        "position_ids": np.zeros((rows, width), np.int32),
        "slot_index": np.zeros((rows, slots), np.int32),
        "targets": np.zeros((rows, slots), np.int32),
        "slot_mask": np.zeros((rows, slots), np.float32),
        "slot_seq_tokens": np.ones((rows, slots), np.float32),
        "row_sequences": np.zeros((rows,), np.float32),
    }
    present = [k for k in SLOT_INPUTS if k in batch]
    out.update({k: np.zeros((rows, slots), np.float32) for k in present})
    row_of, first_slot = np.zeros(n, np.int32), np.zeros(n, np.int32)
    for r, group in enumerate(groups):
        pos, slot = (0, 0) if packing else (prompt_length - int(prompt_lens[group[0]]), 0)
        out["row_sequences"][r] = len(group)
        for seg, i in enumerate(group, start=1):
            tokens = ids[i][attn[i]]
            length, p_len, r_len = len(tokens), int(prompt_lens[i]), int(resp_lens[i])
            out["input_ids"][r, pos : pos + length] = tokens
            out["segment_ids"][r, pos : pos + length] = seg
            out["position_ids"][r, pos : pos + length] = np.arange(length)
            s = slice(slot, slot + r_len)
            out["slot_index"][r, s] = pos + p_len - 1 + np.arange(r_len)
            out["targets"][r, s] = tokens[p_len:]
            out["slot_mask"][r, s] = 1.0
            out["slot_seq_tokens"][r, s] = max(r_len, 1)
            for k in present:
                out[k][r, s] = np.asarray(batch[k])[i, :r_len]
            row_of[i], first_slot[i] = r, slot
            pos, slot = pos + length, slot + r_len
    layout = RowLayout(row_of, first_slot, resp_lens.astype(np.int32), r_width, int(real.sum()), rows * width)
    return out, layout


def slots_to_sequences(values: np.ndarray, layout: RowLayout) -> np.ndarray:
    """Per-slot values ``[rows, K]`` back to the padded ``[N, R]`` layout (0 on response padding)."""
    out = np.zeros((len(layout.row), layout.response_width), np.float32)
    for i, (r, first, count) in enumerate(zip(layout.row, layout.first_slot, layout.response_tokens, strict=True)):
        out[i, :count] = values[r, first : first + count]
    return out
