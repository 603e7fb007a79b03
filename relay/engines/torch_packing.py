"""Where the actor_ref forward puts each real token: sequences packed into fixed-width rows (pure numpy).

The padded batch has rows ``[prompt left-padded to P | response right-padded to R]``. Computing on it
spends FLOPs on every pad. :func:`plan_packing` lays each sequence's real tokens (``attention_mask == 1``,
in order: prompt then response) end to end in packed rows of ``width`` columns, placed first-fit by
decreasing length (:func:`first_fit_decreasing`), fullest rows first (:func:`fullest_rows_first`: a forward
over consecutive rows is as wide as its fullest one). Inside a row every sequence is a segment: its position
ids restart at 0 (equal to the padded batch's ``clip(cumsum(mask) - 1, 0)`` on real tokens, so RoPE sees the
same positions) and attention is causal within the segment only (:func:`block_causal_mask`). The hidden
state at a segment's slot ``k - 1`` predicts its token ``k``; the LM head runs only on the slots that
predict response tokens (``pred_row``/``pred_col``), whose log-probs go back to ``[B, R]`` at
``(out_row, out_col)``. A sequence without response tokens predicts nothing and is not packed at all.

Worked example: ``width = 6``, prompt length ``P = 3``, two sequences (``.`` = pad)::

    attention_mask = [[. 1 1 | 1 1 .]     seq 0: prompt a b, response c d   (4 real tokens)
                      [1 1 1 | 1 . .]]    seq 1: prompt e f g, response h   (4 real tokens)

Both have 4 tokens; a row of 6 holds one, so they get rows 0 and 1 (a tie keeps batch order)::

    row 0: ids [a b c d . .]  segments [0 0 0 0 -1 -1]  positions [0 1 2 3 0 0]
    row 1: ids [e f g h . .]  segments [1 1 1 1 -1 -1]  positions [0 1 2 3 0 0]
    response tokens: c <- slot (0, 1), d <- (0, 2), h <- (1, 2); they land in [B, R] at (0, 0), (0, 1), (1, 0)

With ``width = 8`` both fit in row 0 (segments ``[0 0 0 0 1 1 1 1]``) and ``h`` is predicted from ``(0, 6)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relay.packing import first_fit_decreasing


@dataclass(frozen=True)
class PackPlan:
    """Where every real token of a padded batch goes in the packed rows, and which slots predict responses.

    Token arrays hold one entry per real token of a packed sequence, in the padded batch's row-major order.
    """

    width: int  # columns of a packed row
    prompt_length: int  # P of the padded batch
    fill: np.ndarray  # [rows] columns used in each packed row
    src_row: np.ndarray  # [tokens] the token's row (sequence) in the padded batch
    src_col: np.ndarray  # [tokens] its column in the padded batch
    dst_row: np.ndarray  # [tokens] its packed row
    dst_col: np.ndarray  # [tokens] its packed column
    position: np.ndarray  # [tokens] its position in its own sequence (0 = the sequence's first real token)
    pred_row: np.ndarray  # [targets] packed row of the slot predicting a response token
    pred_col: np.ndarray  # [targets] packed column of that slot
    out_row: np.ndarray  # [targets] where the log-prob goes in [B, R]: the sequence
    out_col: np.ndarray  # [targets] and the response index j

    @property
    def rows(self) -> int:
        return len(self.fill)

    @property
    def real_tokens(self) -> int:
        return len(self.src_row)

    def micro_batches(self, rows_per_batch: int) -> list[slice]:
        """Consecutive packed-row ranges of at most ``rows_per_batch`` rows (one forward each)."""
        step = max(1, rows_per_batch)
        return [slice(start, min(start + step, self.rows)) for start in range(0, self.rows, step)]

    def batch_width(self, rows: slice) -> int:
        """Columns a forward over ``rows`` computes: the fullest row's fill (trailing empty columns are cut)."""
        return int(self.fill[rows].max(initial=0))

    def computed_slots(self, rows_per_batch: int) -> int:
        """Token slots the trunk computes over all micro-batches (real tokens plus padding)."""
        return sum((s.stop - s.start) * self.batch_width(s) for s in self.micro_batches(rows_per_batch))

    def padding_share(self, rows_per_batch: int) -> float:
        """Padded slots / slots computed; 0.0 when nothing is computed.

        Example: 2 sequences of 4 tokens in rows of 6, one row per forward: 8 slots computed, all real -> 0.0
        (each forward is cut to its row's fill). Both rows in one forward: still 2 x 4 -> 0.0.
        """
        computed = self.computed_slots(rows_per_batch)
        return 1.0 - self.real_tokens / computed if computed else 0.0


def fullest_rows_first(
    row_of: np.ndarray, offset_of: np.ndarray, fill: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Renumber packed rows by decreasing fill (ties keep their order), so that a micro-batch of consecutive
    rows holds rows of similar fill and is cut to little more than each of them.

    Example: fills ``[5, 6, 3]`` become ``[6, 5, 3]``; items in row 1 move to row 0 and vice versa.
    """
    order = np.argsort(-fill, kind="stable")  # new row i is old row order[i]
    new_index = np.full(len(order) + 1, -1, np.int64)  # the extra last entry maps row -1 (not placed) to -1
    new_index[order] = np.arange(len(order))
    return new_index[row_of], offset_of, fill[order]


def plan_packing(attention_mask: np.ndarray, prompt_length: int, width: int | None = None) -> PackPlan:
    """The packing of a padded ``[B, P + R]`` batch (``attention_mask`` 1 on real tokens).

    ``width`` defaults to ``P + R``, the padded row width: a forward of ``n`` packed rows then holds at
    most the tokens of ``n`` padded rows, so a micro-batch's memory stays what it was. Sequences without
    response tokens are left out. A sequence whose first real token is a response token has nothing to
    predict it from and is refused.
    """
    real = np.asarray(attention_mask).astype(bool)
    width = int(real.shape[1] if width is None else width)
    has_response = real[:, prompt_length:].any(axis=1)
    lengths = np.where(has_response, real.sum(axis=1), 0)
    row_of, offset_of, fill = fullest_rows_first(*first_fit_decreasing(lengths, width))
    rank = np.cumsum(real, axis=1) - 1  # each real token's position in its own sequence
    src_row, src_col = np.nonzero(real & has_response[:, None])
    position = rank[src_row, src_col]
    dst_row, dst_col = row_of[src_row], offset_of[src_row] + position
    is_target = src_col >= prompt_length
    if np.any(position[is_target] == 0):
        bad = int(src_row[is_target & (position == 0)][0])
        raise ValueError(f"sequence {bad} has response tokens but no prompt token before them")
    return PackPlan(
        width=width,
        prompt_length=prompt_length,
        fill=fill,
        src_row=src_row,
        src_col=src_col,
        dst_row=dst_row,
        dst_col=dst_col,
        position=position,
        pred_row=dst_row[is_target],
        pred_col=dst_col[is_target] - 1,
        out_row=src_row[is_target],
        out_col=src_col[is_target] - prompt_length,
    )


def packed_rows(
    plan: PackPlan, input_ids: np.ndarray, rows: slice, pad_id: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, positions, segments)``, each ``[n, w]`` int64, for packed rows ``rows`` (``w`` = their widest fill).

    ``segments`` holds the padded batch's sequence index of each slot, -1 on padding; padding slots get
    ``pad_id`` and position 0.
    """
    n, w = rows.stop - rows.start, plan.batch_width(rows)
    ids = np.full((n, w), pad_id, np.int64)
    positions = np.zeros((n, w), np.int64)
    segments = np.full((n, w), -1, np.int64)
    pick = (plan.dst_row >= rows.start) & (plan.dst_row < rows.stop)
    r, c = plan.dst_row[pick] - rows.start, plan.dst_col[pick]
    ids[r, c] = input_ids[plan.src_row[pick], plan.src_col[pick]]
    positions[r, c] = plan.position[pick]
    segments[r, c] = plan.src_row[pick]
    return ids, positions, segments


def block_causal_mask(segments: np.ndarray) -> np.ndarray:
    """``[n, 1, w, w]`` bool, True where query slot ``q`` may attend to key slot ``k``: same segment and
    ``k <= q``. A padding slot (segment -1) attends to itself only, so no softmax row is empty.

    Example: segments ``[[0, 0, 1, -1]]`` give the rows ``q0: [1 0 0 0]``, ``q1: [1 1 0 0]``,
    ``q2: [0 0 1 0]``, ``q3: [0 0 0 1]``.
    """
    w = segments.shape[1]
    causal = np.tril(np.ones((w, w), dtype=bool))
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, :, None] >= 0)
    return ((same & causal) | np.eye(w, dtype=bool))[:, None]
