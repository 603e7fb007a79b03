"""Tokenised prompts for each training step, as a DataProto the rollout role reads."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from relay.data.gsm8k import DatasetError, Example, PromptBatcher
from relay.data.revisit import RevisitQueue
from relay.data_proto import DataProto
from relay.metrics import outcomes as om
from relay.tasks.prompt_cache import cached_encode
from relay.tasks.run_tasks import RunTasks

# What the over-long policy cuts: a prompt's tokens or a question's characters.
Fitted = TypeVar("Fitted", list[int], str)


def fit_prompt(tokens: list[int], max_len: int, filter_overlong: bool, truncation: str) -> list[int] | None:
    """Apply the over-long-prompt policy: None = drop it (filter), else the (maybe truncated) tokens.

    ``truncation`` (when not filtering): ``error`` raises, ``left`` keeps the last ``max_len``
    tokens (the end of the chat template, where generation starts), ``right`` keeps the first.
    """
    return _apply_overlong_policy(
        tokens,
        max_len,
        filter_overlong,
        truncation,
        lambda: (
            f"a prompt has {len(tokens)} tokens > data.max_prompt_length={max_len} and data.truncation=error; "
            "raise data.max_prompt_length, set data.filter_overlong_prompts=true, or data.truncation=left|right"
        ),
    )


def fit_question(question: str, max_chars: int, filter_overlong: bool, truncation: str, uid: str = "") -> str | None:
    """The over-long policy of :func:`fit_prompt` on a question's characters (``data.max_prompt_chars``).

    ``max_chars`` 0 means no cap. Returns None to drop the question (filter), else the (maybe truncated)
    question: ``left`` keeps the last ``max_chars`` characters (the end, where the question is asked),
    ``right`` the first. ``truncation=error`` raises a DatasetError naming the key, the example ``uid``
    and the fixes.

    Worked example, ``max_chars=5``: ``"abcdefg"`` -> None (filter), ``"cdefg"`` (left), ``"abcde"`` (right);
    ``"abc"`` is kept whole.
    """
    if max_chars <= 0:
        return question
    return _apply_overlong_policy(
        question,
        max_chars,
        filter_overlong,
        truncation,
        lambda: (
            f"example {uid or '?'}: its question has {len(question)} characters > data.max_prompt_chars={max_chars} "
            "and data.truncation=error; raise data.max_prompt_chars (0: no cap), set "
            "data.filter_overlong_prompts=true, or data.truncation=left|right"
        ),
    )


def _apply_overlong_policy(
    items: Fitted, limit: int, filter_overlong: bool, truncation: str, refusal: Callable[[], str]
) -> Fitted | None:
    """``items`` when it has at most ``limit`` elements; else None (``filter_overlong``), its last ``limit``
    (``truncation=left``) or its first ``limit`` (``right``); any other ``truncation`` raises a DatasetError
    with the message ``refusal()``."""
    if len(items) <= limit:
        return items
    if filter_overlong:
        return None
    if truncation == "left":
        return items[-limit:]
    if truncation == "right":
        return items[:limit]
    raise DatasetError(refusal())


def cap_questions(
    examples: list[Example], max_chars: int, filter_overlong: bool, truncation: str
) -> tuple[list[Example], int, int]:
    """Apply :func:`fit_question` to every example: ``(kept examples, dropped count, truncated count)``.

    Kept examples keep their order; a truncated one carries its truncated question (what the model sees
    and what ``question`` holds downstream).
    """
    kept, truncated = [], 0
    for ex in examples:
        question = fit_question(ex.question, max_chars, filter_overlong, truncation, ex.uid)
        if question is None:
            continue
        if question != ex.question:
            truncated += 1
            ex = replace(ex, question=question)
        kept.append(ex)
    return kept, len(examples) - len(kept), truncated


@dataclass
class PromptSource:
    """Loads a dataset, applies the over-long policy to each question's characters
    (``data.max_prompt_chars``), renders it with the chat template, applies the over-long policy to its
    tokens (``data.max_prompt_length``) and serves shuffled step batches. Dropped and truncated prompts
    are counted per limit and reported, never lost silently."""

    examples: list[Example]
    prompt_ids: dict[str, list[int]]
    batcher: PromptBatcher
    dropped_too_long: int  # by data.max_prompt_length (tokens)
    truncated: int
    dropped_too_many_chars: int = 0  # by data.max_prompt_chars
    truncated_chars: int = 0
    answers: dict[str, str] = field(default_factory=dict)  # each example's answer as text, by uid

    @classmethod
    def from_config(cls, data_cfg: Any, tokenizer: Any, batch_size: int, split: str = "train") -> PromptSource:
        """The prompts of ``split`` (``data.train_path``, or ``test``: ``data.test_path``) under ``data_cfg``'s
        task, template and limits (:class:`relay.tasks.run_tasks.RunTasks`)."""
        tasks = RunTasks.from_config(data_cfg)
        path = data_cfg.train_path if split == "train" else data_cfg.test_path
        loaded = tasks.read(path, split)
        path = path or f"the generated {data_cfg.task} {split} split"
        max_chars = data_cfg.max_prompt_chars
        examples, dropped_chars, truncated_chars = cap_questions(
            loaded, max_chars, data_cfg.filter_overlong_prompts, data_cfg.truncation
        )
        if dropped_chars or truncated_chars:
            print(
                f"data: {dropped_chars} of {len(loaded)} prompts dropped and {truncated_chars} truncated for being "
                f"longer than data.max_prompt_chars={max_chars} characters",
                file=sys.stderr,
            )
        if not examples:
            raise DatasetError(
                f"data.max_prompt_chars={max_chars}: every question in {path} is longer; raise it (0: no cap)"
            )

        def encode() -> list[list[int]]:
            rendered = [tasks.render(ex, tokenizer) for ex in examples]
            return tokenizer(rendered, add_special_tokens=False)["input_ids"]

        encoded = cached_encode(tokenizer, examples, data_cfg, split, encode)
        kept, ids, truncated = [], {}, 0
        for ex, tokens in zip(examples, encoded, strict=True):
            fitted = fit_prompt(
                list(tokens),
                data_cfg.max_prompt_length,
                data_cfg.filter_overlong_prompts,
                data_cfg.truncation,
            )
            if fitted is not None:
                kept.append(ex)
                ids[ex.uid] = fitted
                truncated += len(fitted) < len(tokens)
        dropped = len(examples) - len(kept)
        if dropped or truncated:
            print(
                f"data: {dropped} of {len(examples)} prompts dropped and {truncated} truncated for being longer "
                f"than data.max_prompt_length={data_cfg.max_prompt_length} tokens",
                file=sys.stderr,
            )
        if not kept:
            raise DatasetError(
                f"data.max_prompt_length={data_cfg.max_prompt_length}: every prompt in {path} is longer; raise it"
            )
        batcher = PromptBatcher(kept, batch_size, data_cfg.shuffle_seed, revisit_queue(data_cfg))
        answers = {ex.uid: tasks.task_of(ex).answer_text(ex.ground_truth) for ex in kept}
        return cls(kept, ids, batcher, dropped, truncated, dropped_chars, truncated_chars, answers)

    def summary(self) -> dict[str, int]:
        """The ``data`` event's figures: examples kept, and those dropped or truncated by each limit."""
        return {
            "examples": len(self.examples),
            "dropped_too_long": self.dropped_too_long,
            "truncated": self.truncated,
            "dropped_too_many_chars": self.dropped_too_many_chars,
            "truncated_chars": self.truncated_chars,
        }

    @property
    def epochs_done(self) -> int:
        """Complete passes over the examples so far (a pass ends when its last example is served)."""
        state = self.batcher.state_dict()
        return state["epoch"] + (state["position"] == len(self.examples))

    def next_batch(self, size: int | None = None, sample_pass: int = 0) -> DataProto:
        """``raw_prompt_ids``, ``uid``, ``question``, ``ground_truth`` for the next ``size`` prompts (default:
        a step's). ``sample_pass`` > 0 marks a step's extra rollout pass (dynamic sampling): its uids get a
        ``p<pass>.`` prefix so its groups never merge with the first pass's."""
        batch = self.batcher.next_batch(size)
        tag = f"p{sample_pass}." if sample_pass else ""
        # one GRPO group per prompt of this step, even if an example repeats across an epoch edge (or is revisited)
        uids = [f"{ex.uid}/{tag}{i}" for i, ex in enumerate(batch)]
        return prompt_batch(batch, uids, self.prompt_ids, self.mixed)

    def observe_graded(self, uids: Sequence[str], unsolved: Collection[str]) -> None:
        """A pass's graded groups (their batch ``uid``, one per row) of prompts this source served, into the revisit
        queue (``data.revisit_unsolved``): those in ``unsolved`` (no right sample) and the others, solved."""
        groups = list(dict.fromkeys(str(uid) for uid in uids))
        self.batcher.observe(
            [example_uid(uid) for uid in groups if uid in unsolved],
            [example_uid(uid) for uid in groups if uid not in unsolved],
        )

    def revisit_metrics(self) -> dict[str, float]:
        """``data/revisited``, ``data/revisits_solved`` and ``data/revisit_waiting`` after the latest draw and
        grades (none without a queue)."""
        queue = self.batcher.revisit
        if queue is None:
            return {}
        return {
            om.DATA_REVISITED: float(self.batcher.revisited),
            om.DATA_REVISITS_SOLVED: float(queue.solved_on_visit),
            om.DATA_REVISIT_WAITING: float(len(queue.waiting)),
        }

    @cached_property
    def mixed(self) -> bool:
        """Whether rows name their own tasks (``data.fields.data_source``): batches then carry ``data_source``."""
        return any(ex.data_source is not None for ex in self.examples)


def example_uid(batch_uid: str) -> str:
    """The example a batch row's ``uid`` (``<example uid>/<pass tag><row>``, :meth:`PromptSource.next_batch`) came
    from.

    >>> example_uid("arith-17/3"), example_uid("data/train-4/p1.0")
    ('arith-17', 'data/train-4')
    """
    return batch_uid.rsplit("/", 1)[0]


def revisit_queue(data_cfg: Any) -> RevisitQueue | None:
    """The queue of unsolved prompts ``data.revisit_unsolved`` asks for (None when it is off)."""
    r = data_cfg.revisit_unsolved
    if not r.enable:
        return None
    return RevisitQueue(float(r.share), int(r.delay), int(r.times), bool(r.newest_first), int(r.capacity))


def prompt_batch(examples: list[Example], uids: list[str], prompt_ids: dict[str, list[int]], mixed: bool) -> DataProto:
    """``raw_prompt_ids``, ``uid``, ``question``, ``ground_truth`` of ``examples`` (and ``data_source``, the task
    of each row, when ``mixed``)."""
    non_tensor = {
        "raw_prompt_ids": [prompt_ids[ex.uid] for ex in examples],
        "uid": np.array(uids, dtype=object),
        "question": np.array([ex.question for ex in examples], dtype=object),
        "ground_truth": np.array([ex.ground_truth for ex in examples], dtype=object),
    }
    if mixed:
        non_tensor["data_source"] = np.array([ex.data_source for ex in examples], dtype=object)
    if any(ex.subset is not None for ex in examples):
        non_tensor["subset"] = np.array([ex.subset or "" for ex in examples], dtype=object)
    return DataProto.from_dict(non_tensor=non_tensor)


def validation_prompts(data_cfg: Any, tokenizer: Any, limit: int | None = None) -> DataProto:
    """The first ``limit`` problems of ``data.test_path`` (all when None), in file order, as a prompt batch.

    Same template and over-long policy as training (a dropped problem is reported and the next one takes
    its place), so a validation is deterministic: the same problems at every step and in every run. Besides a
    training batch's columns it carries ``reference_answer``, each problem's answer as text (the majority
    baseline counts them).
    ``uid`` is the example's (``test-<line>``). Worked example: ``limit=3`` on the shipped test set gives
    uids ``["test-1", "test-2", "test-3"]``.
    """
    source = PromptSource.from_config(data_cfg, tokenizer, batch_size=1, split="test")
    chosen = source.examples if limit is None else source.examples[:limit]
    batch = prompt_batch(chosen, [ex.uid for ex in chosen], source.prompt_ids, source.mixed)
    batch.non_tensor["reference_answer"] = np.array([source.answers[ex.uid] for ex in chosen], dtype=object)
    return batch
