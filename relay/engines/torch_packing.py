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

from relay.packing import first_fit_decreasing, prompt_families, prompt_pieces


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
    segment: np.ndarray  # [tokens] its segment: the batch index of the piece's first sequence
    branch: np.ndarray  # [tokens] 0 on a prompt (or an unshared sequence), 1, 2, ... on a shared prompt's responses
    sequence_tokens: int  # real tokens of the packed sequences, each counted with its own prompt
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

    @property
    def shared_prompt_share(self) -> float:
        """Share of the sequences' tokens not computed because a prompt was shared (0.0 without sharing)."""
        return 1.0 - self.real_tokens / self.sequence_tokens if self.sequence_tokens else 0.0

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


def plan_packing(
    attention_mask: np.ndarray,
    prompt_length: int,
    width: int | None = None,
    input_ids: np.ndarray | None = None,
) -> PackPlan:
    """The packing of a padded ``[B, P + R]`` batch (``attention_mask`` 1 on real tokens).

    ``width`` defaults to ``P + R``, the padded row width: a forward of ``n`` packed rows then holds at
    most the tokens of ``n`` padded rows, so a micro-batch's memory stays what it was. Sequences without
    response tokens are left out. A sequence whose first real token is a response token has nothing to
    predict it from and is refused.

    ``input_ids`` given: the samples of one prompt share a single copy of it (:func:`relay.packing.prompt_pieces`,
    at most ``width`` tokens a piece); each response then gets its own branch (:func:`block_causal_mask`).
    """
    real = np.asarray(attention_mask).astype(bool)
    width = int(real.shape[1] if width is None else width)
    has_response = real[:, prompt_length:].any(axis=1)
    prompt_lens, resp_lens = real[:, :prompt_length].sum(1), real[:, prompt_length:].sum(1)
    no_prompt = has_response & (prompt_lens == 0)
    if np.any(no_prompt):
        bad = int(np.nonzero(no_prompt)[0][0])
        raise ValueError(f"sequence {bad} has response tokens but no prompt token before them")
    rank = np.cumsum(real, axis=1) - 1  # each real token's position in its own sequence
    kept = np.nonzero(has_response)[0]
    pieces = _pieces(kept, real, prompt_lens, resp_lens, width, input_ids)
    lengths = np.array([prompt_lens[p[0]] + resp_lens[p].sum() for p in pieces], np.int64)
    row_of, offset_of, fill = fullest_rows_first(*first_fit_decreasing(lengths, width))
    arrays = _place_pieces(pieces, row_of, offset_of, real, prompt_length)
    return PackPlan(
        width=width,
        prompt_length=prompt_length,
        fill=fill,
        position=rank[arrays["src_row"], arrays["src_col"]],
        sequence_tokens=int((prompt_lens + resp_lens)[kept].sum()),
        **arrays,
    )


def _pieces(
    kept: np.ndarray,
    real: np.ndarray,
    prompt_lens: np.ndarray,
    resp_lens: np.ndarray,
    width: int,
    input_ids: np.ndarray | None,
) -> list[list[int]]:
    """The packed units, as batch indices of the ``kept`` sequences: each sequence alone without ``input_ids``,
    else the samples of one prompt together (:func:`relay.packing.prompt_pieces`, at most ``width`` tokens)."""
    if input_ids is None:
        return [[int(i)] for i in kept]
    local = prompt_pieces(np.asarray(input_ids)[kept], real[kept], prompt_lens[kept], resp_lens[kept], width, True)
    return [[int(kept[j]) for j in piece] for piece in local]


def _place_pieces(
    pieces: list[list[int]], row_of: np.ndarray, offset_of: np.ndarray, real: np.ndarray, prompt_length: int
) -> dict[str, np.ndarray]:
    """PackPlan's token and target arrays for ``pieces`` placed at (``row_of``, ``offset_of``): a piece's
    (shared) prompt once, then each of its responses after it, a branch of its own when the prompt is shared."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("src_row", "src_col", "dst_row", "dst_col", "segment")}
    parts |= {"branch": [], "pred_row": [], "pred_col": [], "out_row": [], "out_col": []}

    def place(seq: int, cols: np.ndarray, row: int, start: int, segment: int, branch: int) -> None:
        parts["src_row"].append(np.full(len(cols), seq))
        parts["src_col"].append(cols)
        parts["dst_row"].append(np.full(len(cols), row))
        parts["dst_col"].append(start + np.arange(len(cols)))
        parts["segment"].append(np.full(len(cols), segment))
        parts["branch"].append(np.full(len(cols), branch))

    for piece, row, offset in zip(pieces, row_of, offset_of, strict=True):
        leader, row, offset = piece[0], int(row), int(offset)
        prompt_cols = np.nonzero(real[leader, :prompt_length])[0]
        place(leader, prompt_cols, row, offset, leader, 0)
        cursor, last_prompt = offset + len(prompt_cols), offset + len(prompt_cols) - 1
        for branch, seq in enumerate(piece, start=1 if len(piece) > 1 else 0):
            cols = prompt_length + np.nonzero(real[seq, prompt_length:])[0]
            place(seq, cols, row, cursor, leader, branch)
            # Response token t is predicted from the token before it: the (shared) prompt's last for t = 0.
            parts["pred_row"].append(np.full(len(cols), row))
            parts["pred_col"].append(np.concatenate([[last_prompt], cursor + np.arange(len(cols) - 1)]))
            parts["out_row"].append(np.full(len(cols), seq))
            parts["out_col"].append(cols - prompt_length)
            cursor += len(cols)
    return {k: np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64) for k, v in parts.items()}


MAX_ROW_WIDENING = 4  # a shared-prompt row is at most this many padded rows wide


def shared_prompt_rows(
    input_ids: np.ndarray, attention_mask: np.ndarray, prompt_length: int, micro_batch_size: int
) -> tuple[int, int]:
    """``(width, rows_per_forward)`` for a shared-prompt packing that keeps the padded forward's token budget
    (``micro_batch_size x (P + R)`` per forward): rows wide enough for a whole group's prompt and responses
    (``P + n R``, ``n`` the largest group, at most ``micro_batch_size``), and as many per forward as the budget holds.
    A row is at most :data:`MAX_ROW_WIDENING` padded rows wide: the ``[w, w]`` mask and attention scores of a
    forward grow with ``w`` at a fixed token budget (at most 4x the padded forward's here), and a longer group is
    cut into pieces (:func:`relay.packing.prompt_pieces`).

    Example: ``P = 192``, ``R = 128``, groups of 4, 8 sequences per forward: rows of ``192 + 4 x 128 = 704``,
    ``8 x 320 // 704 = 3`` rows per forward. Groups of 16: rows of ``min(192 + 8 x 128, 4 x 320) = 1216``, 2 per
    forward.
    """
    real = np.asarray(attention_mask).astype(bool)
    micro = max(micro_batch_size, 1)
    response_width = real.shape[1] - prompt_length
    group = max((len(f) for f in prompt_families(input_ids, real, real[:, :prompt_length].sum(1))), default=1)
    width = min(prompt_length + min(group, micro) * response_width, MAX_ROW_WIDENING * real.shape[1])
    return width, max(1, micro * real.shape[1] // width)


def packed_rows(
    plan: PackPlan, input_ids: np.ndarray, rows: slice, pad_id: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, positions, segments, branches)``, each ``[n, w]`` int64, for packed rows ``rows`` (``w`` = their
    widest fill).

    ``segments`` holds the segment (the batch index of its first sequence) of each slot, -1 on padding;
    ``branches`` 0 except on a shared prompt's responses; padding slots get ``pad_id`` and position 0.
    """
    n, w = rows.stop - rows.start, plan.batch_width(rows)
    ids = np.full((n, w), pad_id, np.int64)
    positions = np.zeros((n, w), np.int64)
    segments = np.full((n, w), -1, np.int64)
    branches = np.zeros((n, w), np.int64)
    pick = (plan.dst_row >= rows.start) & (plan.dst_row < rows.stop)
    r, c = plan.dst_row[pick] - rows.start, plan.dst_col[pick]
    ids[r, c] = input_ids[plan.src_row[pick], plan.src_col[pick]]
    positions[r, c] = plan.position[pick]
    segments[r, c] = plan.segment[pick]
    branches[r, c] = plan.branch[pick]
    return ids, positions, segments, branches


def block_causal_mask(segments: np.ndarray, branches: np.ndarray | None = None) -> np.ndarray:
    """``[n, 1, w, w]`` bool, True where query slot ``q`` may attend to key slot ``k``: same segment and
    ``k <= q`` (and, with ``branches``, ``k`` on branch 0 or on ``q``'s branch: a response sees its shared
    prompt and itself, never a sibling). A padding slot (segment -1) attends to itself only, so no softmax
    row is empty.

    Example: segments ``[[0, 0, 1, -1]]`` give the rows ``q0: [1 0 0 0]``, ``q1: [1 1 0 0]``,
    ``q2: [0 0 1 0]``, ``q3: [0 0 0 1]``. Segments ``[[0, 0, 0, 0]]`` with branches ``[[0, 1, 2, 2]]``:
    ``q2: [1 0 1 0]``, ``q3: [1 0 1 1]``.
    """
    w = segments.shape[1]
    causal = np.tril(np.ones((w, w), dtype=bool))
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, :, None] >= 0)
    if branches is not None:
        same &= (branches[:, None, :] == 0) | (branches[:, :, None] == branches[:, None, :])
    return ((same & causal) | np.eye(w, dtype=bool))[:, None]
