"""Grading reasoning-gym problems with each dataset's own verifier (``score_answer``).

A reasoning-gym item is ``{"question", "answer", "metadata"}``; some verifiers read only ``answer``, others the
metadata too (the numbers of a puzzle, a board). The ground truth Relay carries for a row is therefore the item's
JSON: ``{"dataset": name, "answer": ..., "metadata": {...}}`` (:func:`encode_ground_truth`). The grader reads the
response's final answer as the ``exact`` grader does (``#### X``, else the last ``\\boxed{X}``, else "the answer is
X") and asks the dataset's verifier for a score in [0, 1].

Binary by default: a response is right when the verifier gives exactly 1.0, and scores 1.0; anything less is
wrong (``reward.format_score`` when formatted). reasoning-gym's verifiers give partial credit by default (the
base ``score_answer`` gives ``len(answer) / len(response)`` when the answer is a substring: ``"x 3"`` scores 0.33
against ``3``), which rewards padding; ``reward.grader_options.partial_credit=true`` uses the verifier's score as the
reward (``acc`` stays the binary 1.0-or-not).

Example::

    >>> truth = encode_ground_truth({"answer": "8", "metadata": {"source_dataset": "basic_arithmetic"}})
    >>> grade_reasoning_gym("5 + 3 = \\\\boxed{8}", truth)["acc"]
    1.0

Nothing in a response is run: verifiers compare text or parse it (reasoning-gym's own code).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from relay.scoring.answer import answer_to_grade, final_answer_text
from relay.scoring.grade_settings import DEFAULT_SETTINGS, GradeSettings

# The key of the dataset's name in an item's metadata (reasoning-gym's own).
SOURCE_KEY = "source_dataset"


def encode_ground_truth(item: Mapping[str, Any]) -> str:
    """A reasoning-gym item (``answer``, ``metadata`` with ``source_dataset``) as the ground-truth text of a row:
    compact JSON, keys sorted, non-JSON values (tuples) as lists, anything else as its ``str``."""
    metadata = dict(item.get("metadata") or {})
    return json.dumps(
        {"dataset": metadata.get(SOURCE_KEY), "answer": item["answer"], "metadata": metadata},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )


def decode_ground_truth(ground_truth: str) -> dict[str, Any]:
    """The item :func:`encode_ground_truth` wrote: ``{"dataset", "answer", "metadata"}``. ValueError naming what is
    wrong otherwise (not JSON, no dataset, no answer)."""
    try:
        item = json.loads(ground_truth)
    except json.JSONDecodeError as e:
        raise ValueError(f"not a reasoning-gym ground truth (invalid JSON: {e.msg})") from None
    if not isinstance(item, dict) or not item.get("dataset") or "answer" not in item:
        raise ValueError("not a reasoning-gym ground truth (needs a JSON object with 'dataset' and 'answer')")
    return item


def answer_of(ground_truth: str) -> str:
    """The answer text of a reasoning-gym ground truth: ``answer_of('{"dataset":"x","answer":"8"}') == "8"``."""
    return str(decode_ground_truth(ground_truth)["answer"])


@functools.cache
def score_function(dataset: str) -> Callable[[str | None, dict[str, Any]], float]:
    """The verifier of ``dataset`` (reasoning-gym's ``get_score_answer_fn``), built once per process."""
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(dataset)


def verifier_score(answer: str | None, ground_truth: str) -> float:
    """The dataset's own score of ``answer`` (None: no answer) against the encoded item, in [0, 1]."""
    item = decode_ground_truth(ground_truth)
    entry = {"answer": item["answer"], "metadata": item.get("metadata") or {}}
    return float(score_function(item["dataset"])(answer, entry))


def grade_reasoning_gym(
    response_text: str, ground_truth: str, settings: GradeSettings = DEFAULT_SETTINGS, *, partial_credit: bool = False
) -> dict[str, Any]:
    """Grade one response against an encoded reasoning-gym item (module docstring). Returns ``{"score", "acc",
    "extracted", "formatted"}``: ``acc`` 1.0 when the verifier gives 1.0; ``score`` 1.0 then, else
    ``settings.format_score`` for a formatted answer (or the verifier's partial score with ``partial_credit``,
    whichever is larger), else 0. ``settings.use_last_number_fallback`` grades an unformatted response's last
    number. ``settings.math_verify_timeouts`` is unused (the pool's item timer bounds a verifier)."""
    extracted, formatted = answer_to_grade(
        final_answer_text(response_text), response_text, settings.use_last_number_fallback
    )
    if extracted is None:
        return {"score": 0.0, "acc": 0.0, "extracted": None, "formatted": False}
    value = verifier_score(extracted, ground_truth)
    correct = value == 1.0
    score = 1.0 if correct else (settings.format_score if formatted else 0.0)
    if partial_credit and not correct:
        score = max(score, value)
    return {"score": score, "acc": float(correct), "extracted": extracted, "formatted": formatted}
