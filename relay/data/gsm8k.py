"""GSM8K loading, chat prompts and a resumable shuffled prompt batcher."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from relay.data.revisit import RevisitQueue

_LINE_FORMAT_HINT = "each line must be a JSON object with 'question' and 'answer' ending in '#### <number>'"

SYSTEM_PROMPT = "You are a careful math tutor."

PROMPT_TEMPLATES: dict[str, str] = {
    "concise": (
        "{prompt}\nSolve it step by step in a few short sentences, then write the final answer as '#### <number>'."
    ),
    "plain": "{prompt}\nWrite the final answer as '#### <number>'.",
    # The question alone: the answer format is not asked for, so a run learns it from the reward's format_score.
    "question": "{prompt}",
    # reward.mode=solver: the policy writes advice for a solver model, which answers the question.
    "guideline": (
        "{prompt}\nDo not solve it. In at most three short sentences, tell a student which quantities to "
        "find and in what order."
    ),
    # Multi-turn tool use (rollout.agent.enable): the call syntax shown once (relay/agent/tool_call.py).
    "tools": (
        "{prompt}\nSolve it step by step. For arithmetic, call the calculator: write "
        "<tool_call>calculator: 48 / 2</tool_call> and you will read <tool_result>24</tool_result>. "
        "Then write the final answer as '#### <number>'."
    ),
}


class DatasetError(ValueError):
    """A dataset file is malformed; the message names ``path:line`` and how to fix it."""


@dataclass(frozen=True)
class Example:
    """One problem: ``question`` is the prompt column's text, ``ground_truth`` what its grader compares with (for
    GSM8K the final answer after ``####``, commas removed). ``data_source`` names the row's task in a dataset that
    mixes sources (``data.fields.data_source``); None: the run's task (``data.task``). ``subset`` names the part of
    the split the row belongs to (a reasoning-gym dataset, a difficulty level: ``data.fields.subset``), which
    validation reports on its own; None: none."""

    uid: str
    question: str
    ground_truth: str
    data_source: str | None = None
    subset: str | None = None


def _parse_line(line: str, where: str, uid: str) -> Example:
    """Turn one JSONL line into an Example, raising DatasetError prefixed with ``where``."""

    def fail(problem: str) -> DatasetError:
        return DatasetError(f"{where}: {problem} ({_LINE_FORMAT_HINT})")

    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as e:
        raise fail(f"invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(record, dict):
        raise fail(f"expected a JSON object, got {type(record).__name__}")
    for key in ("question", "answer"):
        if key not in record:
            raise fail(f"missing key '{key}'")
        if not isinstance(record[key], str) or not record[key].strip():
            raise fail(f"key '{key}' must be a non-empty string")
    try:
        ground_truth = gsm8k_ground_truth(record["answer"])
    except ValueError as e:
        raise fail(str(e)) from None
    return Example(uid=uid, question=record["question"].strip(), ground_truth=ground_truth)


def gsm8k_ground_truth(answer: str) -> str:
    """The final answer after a GSM8K solution's last ``####``, thousands commas removed; ValueError naming the
    problem when there is none.

    >>> gsm8k_ground_truth("48 / 2 = 24 clips\\n#### 1,024")
    '1024'
    """
    if "####" not in answer:
        raise ValueError("'answer' has no '####' final-answer marker")
    ground_truth = answer.rsplit("####", 1)[1].replace(",", "").strip()
    if not ground_truth:
        raise ValueError("nothing after '####' in 'answer'")
    return ground_truth


def load_gsm8k(path: str | Path) -> list[Example]:
    """Read a GSM8K-style JSONL file; uids are ``"{file stem}-{1-based line number}"``.

    Blank lines are skipped. Raises FileNotFoundError for a missing file and DatasetError
    for a malformed line or a file without examples.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: GSM8K file not found; the repo ships data/gsm8k/train.jsonl and "
            "data/gsm8k/test.jsonl (check the path is relative to the repo root)"
        )
    examples = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                examples.append(_parse_line(line, f"{path}:{lineno}", f"{path.stem}-{lineno}"))
    if not examples:
        raise DatasetError(f"{path}:1: file has no examples ({_LINE_FORMAT_HINT})")
    return examples


def build_messages(question: str, template: str = "concise") -> list[dict[str, str]]:
    """Chat messages (system + user) asking for a short solution ending in ``#### <number>``."""
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"unknown prompt template {template!r}; choose one of {sorted(PROMPT_TEMPLATES)}")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": PROMPT_TEMPLATES[template].replace("{prompt}", question.strip())},
    ]


class PromptBatcher:
    """Endless fixed-size batches over shuffled epochs; resumable via state_dict().

    Epoch ``e`` uses the permutation drawn from ``numpy.random.default_rng([seed, e])``, so a
    batch may span the end of one epoch and the start of the next.
    """

    def __init__(
        self, examples: list[Example], batch_size: int, seed: int, revisit: RevisitQueue | None = None
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if batch_size > len(examples):
            raise ValueError(f"batch_size ({batch_size}) is larger than the number of examples ({len(examples)})")
        self._examples = list(examples)
        # a revisit names its examples by uid (a warm start batches trace indices, and revisits nothing)
        self._by_uid = {ex.uid: ex for ex in self._examples} if revisit is not None else {}
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._permutation(0)
        self.revisit = revisit
        self.revisited = 0  # prompts of the last step draw taken from the revisit queue

    def _permutation(self, epoch: int) -> np.ndarray:
        """The example order for ``epoch``."""
        return np.random.default_rng([self.seed, epoch]).permutation(len(self._examples))

    def next_batch(self, size: int | None = None) -> list[Example]:
        """Exactly ``size`` (default ``batch_size``) examples, wrapping into the next epoch when needed. A step's
        draw (``size`` None) with a revisit queue starts with the queue's ready prompts
        (:meth:`relay.data.revisit.RevisitQueue.take`); an extra pass's draw (a ``size``) reads the data order only."""
        if size is not None and size <= 0:
            raise ValueError(f"batch size must be positive, got {size}")
        if size is None and self.revisit is not None:
            batch = [self._by_uid[uid] for uid in self.revisit.take(self.batch_size)]
            self.revisited = len(batch)
            return batch + self._ordered(self.batch_size - len(batch))
        return self._ordered(self.batch_size if size is None else size)

    def observe(self, unsolved: list[str], solved: list[str]) -> None:
        """The example uids of graded prompts, into the revisit queue (none: nothing to do)."""
        if self.revisit is not None:
            self.revisit.observe(unsolved, solved)

    def _ordered(self, size: int) -> list[Example]:
        """The next ``size`` examples of the data order."""
        batch: list[Example] = []
        while len(batch) < size:
            if self.position == len(self._examples):
                self.epoch += 1
                self.position = 0
                self._order = self._permutation(self.epoch)
            take = min(size - len(batch), len(self._examples) - self.position)
            batch.extend(self._examples[i] for i in self._order[self.position : self.position + take])
            self.position += take
        return batch

    def state_dict(self) -> dict[str, Any]:
        """Position to resume from (plus seed and dataset size, checked on load), and the revisit queue's state
        when there is one."""
        state: dict[str, Any] = {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "num_examples": len(self._examples),
        }
        if self.revisit is not None:
            state["revisit"] = self.revisit.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where the batcher that produced ``state`` stopped."""
        if state["seed"] != self.seed or state["num_examples"] != len(self._examples):
            raise ValueError(
                f"batcher state is for seed={state['seed']} over {state['num_examples']} examples, "
                f"but this batcher has seed={self.seed} over {len(self._examples)} examples"
            )
        if not 0 <= state["position"] <= len(self._examples):
            raise ValueError(f"batcher state position {state['position']} out of range")
        if ("revisit" in state) != (self.revisit is not None):
            saved = "true" if "revisit" in state else "false"
            raise ValueError(
                f"the checkpoint's data cursor was saved with data.revisit_unsolved.enable={saved}; resume with the "
                "same setting (the queue of unsolved prompts is part of the cursor)"
            )
        self.epoch = state["epoch"]
        self.position = state["position"]
        self._order = self._permutation(self.epoch)
        if self.revisit is not None:
            self.revisit.load_state_dict(state["revisit"])
