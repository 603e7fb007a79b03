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
- ``slot_mask`` (1 on the model's response tokens; 0 on padding slots and on a multi-turn response's tool
  tokens, which are laid out and attended but not trained on), ``slot_seq_tokens`` (the model's tokens in the
  slot's sequence, for ``seq-mean-token-mean``), ``slot_sequence`` (the slot's sequence within its row, 1, 2,
  ...; 0 on padding slots: the sequence-level policy losses reduce over it) ``[rows, K]`` and ``row_sequences``
  ``[rows]`` (sequences in the row).

With ``packing=False`` every sequence gets a row of its own (``W = P + R``, ``K = R``): the padded layout,
written in the same terms, so the packed and the padded learner share one compiled loss.

Rows are filled first-fit by decreasing length (each sequence, longest first, goes into the first row with
room), which is within 22% of the fewest rows possible.

Worked example: ``W = 8``, two sequences of (prompt, response) real lengths (3, 2) and (2, 1)::

    input_ids    = [p p p r r q q s]      segment_ids  = [1 1 1 1 1 2 2 2]
    position_ids = [0 1 2 3 4 0 1 2]
    slots:   slot_index = [2 3 6]   targets = [r r s]   slot_seq_tokens = [2 2 1]   slot_sequence = [1 1 2]

The first response token of sequence 1 (position 3) is predicted from position 2, its last prompt token.

Shared prompts (``share_prompts=True``): a GRPO group's ``n`` samples repeat one prompt, and computing it
``n`` times is waste (the prompt's hidden states do not depend on the response after it). The group's
prompt is laid out once, then each response, and ``branch_ids`` (0 on the prompt, ``1, 2, ...`` per
response) restrict attention: a response token sees its prompt and its own response, never a sibling's.
Positions continue from the prompt in every branch, so each response sees exactly what it saw in its own
sequence. ``W = 8``, one prompt ``p p p`` with responses ``r r`` and ``s``::

    input_ids    = [p p p r r s . .]      segment_ids = [1 1 1 1 1 1 0 0]
    position_ids = [0 1 2 3 4 3 0 0]      branch_ids  = [0 0 0 1 1 2 0 0]
    slots:   slot_index = [2 3 2]   targets = [r r s]

Both responses' first tokens are predicted from position 2, the shared prompt's last token; the gradient
flowing into the prompt's tokens is the sum of what each sequence would send it, so loss, log-probs and
gradients equal the unshared layout's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# Response positions per LM-head chunk, in the learner (relay/models/jax_logprobs.py) and the actor_ref's packed
# forward (relay/engines/torch_logprobs.py): [256, vocab] float32 logits (48 MiB for SmolLM2's 49152) at a time.
HEAD_CHUNK = 256

SLOT_INPUTS = ("advantages", "ref_log_probs", "old_log_probs", "rollout_log_probs")


@dataclass(frozen=True)
class RowLayout:
    """Where each sequence of the padded batch went: to unpack per-slot results back to ``[N, R]``."""

    row: np.ndarray  # [N] the row holding sequence i
    first_slot: np.ndarray  # [N] its first response slot in that row
    response_tokens: np.ndarray  # [N] its response length (slots used)
    response_width: int  # R of the padded batch
    real_tokens: int  # the real tokens laid out: a shared prompt counts once
    computed_tokens: int  # rows x W: the token positions the trunk computes
    sequence_tokens: int  # prompt + response tokens of every sequence, each with its own prompt

    @property
    def padding_share(self) -> float:
        """Padded token positions / token positions computed (0 = every computed position is a real token)."""
        return 1.0 - self.real_tokens / max(self.computed_tokens, 1)

    @property
    def shared_prompt_share(self) -> float:
        """The share of the sequences' tokens not computed because a prompt was shared: 1 - laid out / total.

        Example: 4 samples of a 100-token prompt with 50-token responses are 600 tokens; one prompt copy
        lays out 300: 0.5."""
        return 1.0 - self.real_tokens / max(self.sequence_tokens, 1)


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


def prompt_families(ids: np.ndarray, attn: np.ndarray, prompt_lens: np.ndarray) -> list[list[int]]:
    """Sequences grouped by identical real prompt tokens, each group and the groups in batch order.

    Example: prompts ``a, b, a, a`` -> ``[[0, 2, 3], [1]]``."""
    families: dict[bytes, list[int]] = {}
    for i in range(len(ids)):
        families.setdefault(np.asarray(ids[i])[attn[i]][: prompt_lens[i]].tobytes(), []).append(i)
    return list(families.values())


def prompt_pieces(
    ids: np.ndarray, attn: np.ndarray, prompt_lens: np.ndarray, resp_lens: np.ndarray, width: int, share: bool
) -> list[list[int]]:
    """The sequences each packed segment holds, in batch order.

    Without ``share`` every sequence is a segment of its own. With ``share``, sequences whose real prompt
    tokens are identical (a GRPO group's ``n`` samples) form a family whose prompt is laid out once and
    followed by each member's response; a family longer than ``width`` (``p + r1 + r2 + ...``) is cut into
    pieces, each with its own copy of the prompt, filled with the family's responses in batch order.

    Example (``share``, ``width = 10``): a family of prompt length 4 with responses of 3, 3 and 2 tokens is
    ``[[0, 1], [2]]``: ``4 + 3 + 3 = 10`` fits, the third response needs a second copy of the prompt.
    """
    if not share:
        return [[i] for i in range(len(ids))]
    pieces: list[list[int]] = []
    for members in prompt_families(ids, attn, prompt_lens):
        piece, fill = [], 0
        for i in members:
            p_len, r_len = int(prompt_lens[i]), int(resp_lens[i])
            if piece and fill + r_len > width:
                pieces.append(piece)
                piece, fill = [], 0
            piece, fill = piece + [i], (fill or p_len) + r_len
        pieces.append(piece)
    return sorted(pieces, key=lambda piece: piece[0])


@dataclass(frozen=True)
class PaddedSequences:
    """A padded batch's tokens, where its real tokens are, and each sequence's real prompt and response lengths."""

    ids: np.ndarray  # [N, P+R] token ids
    attn: np.ndarray  # [N, P+R] True on real tokens (prompt and response)
    prompt_lens: np.ndarray  # [N] real prompt tokens
    resp_lens: np.ndarray  # [N] real response tokens (a multi-turn response's tool tokens included)
    loss: np.ndarray  # [N, R] bool: the model's response tokens, the ones trained on

    def real_tokens(self, i: int) -> np.ndarray:
        """Sequence ``i``'s real tokens, prompt then response, without its padding."""
        return self.ids[i][self.attn[i]]


def padded_sequences(batch: Mapping[str, np.ndarray], prompt_length: int) -> PaddedSequences:
    """The real lengths of a padded batch's sequences; refuses a row that is not ``[real prompt | real response]``
    (at least one prompt token, the response's attended tokens first, ``response_mask`` only on attended ones).

    A response's real tokens are its attended ones (``attention_mask``); ``response_mask`` says which of them are
    the model's (trained on): a multi-turn response's tool tokens are attended and not trained on."""
    ids = np.asarray(batch["input_ids"])
    attn = np.asarray(batch["attention_mask"]) > 0
    loss = np.asarray(batch["response_mask"]) > 0
    prompt_lens = attn[:, :prompt_length].sum(1)
    resp_lens = attn[:, prompt_length:].sum(1)
    leading = np.arange(attn.shape[1] - prompt_length)[None, :] < resp_lens[:, None]
    if np.any(attn[:, prompt_length:] != leading) or np.any(prompt_lens < 1) or np.any(loss & ~leading):
        raise ValueError(
            "each row must be [real prompt (>= 1 token) | real response, then padding], response_mask 1 only on "
            "attended response tokens"
        )
    return PaddedSequences(ids, attn, prompt_lens, resp_lens, loss)


def packed_groups(seqs: PaddedSequences, width: int, share_prompts: bool) -> list[list[list[int]]]:
    """The segments of each packed row, in row order and, within a row, in the order they are laid out: each
    segment a list of sequences (one, or with ``share_prompts`` a prompt family's piece, :func:`prompt_pieces`)
    placed first-fit by decreasing length."""
    pieces = prompt_pieces(seqs.ids, seqs.attn, seqs.prompt_lens, seqs.resp_lens, width, share_prompts)
    piece_lens = np.array([seqs.prompt_lens[p[0]] + seqs.resp_lens[p].sum() for p in pieces], np.int64)
    row_of, offset_of, _ = first_fit_decreasing(piece_lens, width)
    return [
        [pieces[j] for j in sorted(np.nonzero(row_of == r)[0], key=lambda j: offset_of[j])]
        for r in range(int(row_of.max()) + 1)
    ]


def empty_rows(rows: int, width: int, slots: int, slot_inputs: list[str]) -> dict[str, np.ndarray]:
    """The row layout's arrays before any sequence is written: all padding (``slot_seq_tokens`` 1, a safe
    divisor), plus a ``[rows, slots]`` array for each name of ``slot_inputs``."""
    out = {
        "input_ids": np.zeros((rows, width), np.int32),
        "segment_ids": np.zeros((rows, width), np.int32),
        "position_ids": np.zeros((rows, width), np.int32),
        "branch_ids": np.zeros((rows, width), np.int32),
        "slot_index": np.zeros((rows, slots), np.int32),
        "targets": np.zeros((rows, slots), np.int32),
        "slot_mask": np.zeros((rows, slots), np.float32),
        "slot_seq_tokens": np.ones((rows, slots), np.float32),
        "slot_sequence": np.zeros((rows, slots), np.int32),
        "row_sequences": np.zeros((rows,), np.float32),
    }
    out.update({k: np.zeros((rows, slots), np.float32) for k in slot_inputs})
    return out


def layout_rows(
    batch: Mapping[str, np.ndarray],
    prompt_length: int,
    *,
    packing: bool,
    width: int | None = None,
    slot_bucket: int = 1,
    row_multiple: int = 1,
    share_prompts: bool = False,
) -> tuple[dict[str, np.ndarray], RowLayout]:
    """Rewrite a padded batch (``input_ids``/``attention_mask`` ``[N, P+R]``, ``response_mask`` and the
    :data:`SLOT_INPUTS` present ``[N, R]``) into the row layout described in the module docstring.

    ``width``: packed row width (``packing=True``; default the longest sequence); ``slot_bucket``: ``K``
    is rounded up to a multiple of it (fewer distinct shapes, fewer compiles); ``row_multiple``: empty rows
    are appended until the row count divides by it (rows with ``segment_ids`` 0 and no slots).
    ``share_prompts`` (with ``packing``): the samples of one prompt share a single copy of it in their row
    (:func:`prompt_pieces`); ``branch_ids`` then number each segment's responses 1, 2, ... (0 on its prompt),
    and a response token attends to its prompt and to its own response only.
    """
    seqs = padded_sequences(batch, prompt_length)
    n, total = seqs.ids.shape
    real = seqs.prompt_lens + seqs.resp_lens
    if packing:
        width = width or int(real.max(initial=1))
        groups = packed_groups(seqs, width, share_prompts)
    else:
        width = total
        groups = [[[i]] for i in range(n)]
    rows = round_up(len(groups), row_multiple) if groups else row_multiple
    slots = round_up(int(max((sum(seqs.resp_lens[p].sum() for p in g) for g in groups), default=1)), slot_bucket)
    present = [k for k in SLOT_INPUTS if k in batch]
    out = empty_rows(rows, width, slots, present)
    writer = RowWriter(out, seqs, {k: np.asarray(batch[k]) for k in present})
    for r, group in enumerate(groups):
        # The padded layout keeps each prompt where it was: right-aligned to prompt_length.
        writer.write_row(r, group, 0 if packing else prompt_length - int(seqs.prompt_lens[group[0][0]]))
    layout = RowLayout(
        writer.row_of,
        writer.first_slot,
        seqs.resp_lens.astype(np.int32),
        total - prompt_length,
        writer.placed,
        rows * width,
        int(real.sum()),
    )
    return out, layout


class RowWriter:
    """Writes sequences into the arrays of :func:`empty_rows` and records where each went (its row and first
    slot) and how many real tokens were laid out."""

    def __init__(self, out: dict[str, np.ndarray], seqs: PaddedSequences, slot_inputs: dict[str, np.ndarray]) -> None:
        self.out = out
        self.seqs = seqs
        self.slot_inputs = slot_inputs  # [N, R] per-token inputs, copied onto each response's slots
        n = len(seqs.ids)
        self.row_of, self.first_slot = np.zeros(n, np.int32), np.zeros(n, np.int32)
        self.placed = 0

    def write_row(self, r: int, group: list[list[int]], start: int) -> None:
        """Row ``r``: ``group``'s segments end to end from token ``start``, each its prompt then its responses
        (numbered as branches 1, 2, ... when the segment shares its prompt, else 0), their slots from slot 0."""
        self.out["row_sequences"][r] = sum(len(piece) for piece in group)
        pos, slot, sequence = start, 0, 0
        for seg, piece in enumerate(group, start=1):
            p_len = int(self.seqs.prompt_lens[piece[0]])
            self.write_tokens(r, pos, seg, self.seqs.real_tokens(piece[0])[:p_len], np.arange(p_len))
            last_prompt, pos = pos + p_len - 1, pos + p_len
            for branch, i in enumerate(piece, start=1 if len(piece) > 1 else 0):
                r_len, response = int(self.seqs.resp_lens[i]), self.seqs.real_tokens(i)[p_len:]
                self.write_tokens(r, pos, seg, response, p_len + np.arange(r_len))
                self.out["branch_ids"][r, pos : pos + r_len] = branch
                sequence += 1
                self.write_slots(r, slot, i, pos, last_prompt, response, sequence)
                self.row_of[i], self.first_slot[i] = r, slot
                pos, slot = pos + r_len, slot + r_len
            self.placed += p_len + int(self.seqs.resp_lens[piece].sum())

    def write_tokens(self, r: int, pos: int, seg: int, tokens: np.ndarray, positions: np.ndarray) -> None:
        """``tokens`` into row ``r`` from token ``pos``, as segment ``seg`` at RoPE ``positions``."""
        end = pos + len(positions)
        self.out["input_ids"][r, pos:end] = tokens
        self.out["segment_ids"][r, pos:end] = seg
        self.out["position_ids"][r, pos:end] = positions

    def write_slots(
        self, r: int, slot: int, i: int, pos: int, last_prompt: int, response: np.ndarray, sequence: int
    ) -> None:
        """Sequence ``i``'s response slots in row ``r`` from slot ``slot``: its response laid out from token
        ``pos``, its prompt ending at token ``last_prompt``, the row's ``sequence``-th sequence."""
        r_len = int(self.seqs.resp_lens[i])
        s = slice(slot, slot + r_len)
        # Response token t is predicted from the token before it: the prompt's last for t = 0.
        self.out["slot_index"][r, s] = np.concatenate([[last_prompt], pos + np.arange(r_len - 1)])[:r_len]
        self.out["targets"][r, s] = response
        model_tokens = self.seqs.loss[i, :r_len]  # 0 on a multi-turn response's tool tokens
        self.out["slot_mask"][r, s] = model_tokens
        self.out["slot_seq_tokens"][r, s] = max(int(model_tokens.sum()), 1)
        self.out["slot_sequence"][r, s] = sequence
        for k, values in self.slot_inputs.items():
            self.out[k][r, s] = values[i, :r_len]


def slots_to_sequences(values: np.ndarray, layout: RowLayout) -> np.ndarray:
    """Per-slot values ``[rows, K]`` back to the padded ``[N, R]`` layout (0 on response padding)."""
    out = np.zeros((len(layout.row), layout.response_width), np.float32)
    for i, (r, first, count) in enumerate(zip(layout.row, layout.first_slot, layout.response_tokens, strict=True)):
        out[i, :count] = values[r, first : first + count]
    return out
