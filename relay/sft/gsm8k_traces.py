"""Supervised warm-start traces from GSM8K's own solutions: calculator annotations become tool calls.

A GSM8K training solution marks each computation with ``<<expression=result>>``, writes the result again right
after it, and ends with ``#### <answer>``::

    Natalia sold 48/2 = <<48/2=24>>24 clips in May.

:func:`tool_trace` turns it into the text a multi-turn tool rollout produces (:mod:`relay.agent.tool_call`): each
annotation becomes a calculator call written by the model, followed by the result exactly as the rollout appends
it (``result_text`` of what :func:`relay.tools.registry.run_tool` returns for the expression), and the model's
text goes on after it. The number the solution wrote right after the annotation duplicates the tool result, so it
is dropped when it equals the annotated result (commas allowed, ``24`` or ``1,200``); what follows it stays::

    ("Natalia sold 48/2 = <tool_call>calculator: 48/2</tool_call>", True)
    ("<tool_result>24</tool_result>", False)
    (" clips in May.", True)

Segments are ``(text, trained)``: model text is trained, tool results are not (the rollout's loss mask is 0 on
them). The ``#### <answer>`` line stays as the model's last text; a solution without annotations is one trained
segment with ``calls == 0``. :func:`plain_trace` is the solution as one trained chain of thought with the
annotations removed (``Natalia sold 48/2 = 24 clips in May.``). A solution that cannot be converted raises
:class:`TraceError` with one of the ``REASONS`` below. ``python -m relay.sft.gsm8k_traces --form tools --limit 2000``
prints the counts as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from relay.agent.tool_call import CALL_CLOSE, CALL_OPEN, result_text
from relay.data.gsm8k import DatasetError, gsm8k_ground_truth
from relay.scoring.answer import extract_answer, normalize_answer
from relay.tools.registry import ToolCall, ToolLimits, run_tool

REASONS = (
    "no_final_answer",  # no '####', or nothing after it
    "malformed_annotation",  # unbalanced '<<' / '>>', no '=', an empty expression, a result that is not a number
    "calculator_error",  # the calculator refuses the expression
    "result_mismatch",  # calculator value and annotated result differ by more than REL_TOL (wrong or rounded)
    "visible_number_mismatch",  # the number written right after an annotation is not its result
    "answer_mismatch",  # the final answer the grader extracts from the trace is not the row's ground truth
)
REL_TOL = 1e-6  # calculator value vs annotated result; the calculator prints 10 significant digits
_ANNOTATION = re.compile(r"<<(.*?)>>", re.DOTALL)
_VISIBLE_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|-?\.\d+")


class TraceError(ValueError):
    """A solution that cannot be converted; ``reason`` is one of :data:`REASONS`, the message says where."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class Trace:
    """One converted solution: ``segments`` are ``(text, trained)`` in order, ``calls`` its calculator calls."""

    uid: str
    question: str
    segments: tuple[tuple[str, bool], ...]
    calls: int

    @property
    def text(self) -> str:
        """The whole response: every segment's text joined."""
        return "".join(text for text, _ in self.segments)


def _number(text: str) -> float | None:
    """``text`` as a float (``$`` and commas dropped), or None when it is not a number."""
    try:
        return float(text.replace(",", "").replace("$", "").strip())
    except ValueError:
        return None


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)


def _check_structure(answer: str) -> None:
    """TraceError unless ``answer`` has a ``####`` line and every ``<<`` is closed by a ``>>`` before the next."""
    try:
        gsm8k_ground_truth(answer)
    except ValueError as exc:
        raise TraceError("no_final_answer", str(exc)) from None
    nested = next((m.group(0) for m in _ANNOTATION.finditer(answer) if "<<" in m.group(1)), None)
    rest = _ANNOTATION.sub("", answer)
    if nested or "<<" in rest or ">>" in rest:
        where = f" in {nested[:60]!r}" if nested else ""
        raise TraceError("malformed_annotation", f"unbalanced '<<' / '>>'{where}")


def _annotations(answer: str) -> list[tuple[re.Match[str], str, float]]:
    """Each annotation's match, expression and annotated value; TraceError for a malformed solution."""
    _check_structure(answer)
    found = []
    for match in _ANNOTATION.finditer(answer):
        expression, equals, result = match.group(1).rpartition("=")
        value = _number(result)
        if not equals or not expression.strip() or value is None:
            raise TraceError("malformed_annotation", f"{match.group(0)!r} is not <<expression=number>>")
        found.append((match, expression.strip(), value))
    return found


def _checked(trace: Trace, answer: str) -> Trace:
    """``trace`` when the final answer the grader extracts from it is the row's ground truth, else TraceError."""
    truth, extracted = normalize_answer(gsm8k_ground_truth(answer)), extract_answer(trace.text)
    if extracted != truth:
        raise TraceError("answer_mismatch", f"the trace's final answer is {extracted!r}, not {truth!r}")
    return trace


def tool_trace(question: str, answer: str, uid: str) -> Trace:
    """The solution as a multi-turn calculator trace (module docstring); TraceError when it cannot be converted.

    Example: ``"Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 24"`` gives the segments
    ``("Natalia sold 48/2 = <tool_call>calculator: 48/2</tool_call>", True)``,
    ``("<tool_result>24</tool_result>", False)`` and ``(" clips.\\n#### 24", True)``, with ``calls == 1``.
    """
    answer = answer.strip()
    segments: list[tuple[str, bool]] = []
    position = 0
    annotations = _annotations(answer)
    for match, expression, value in annotations:
        result = run_tool(ToolCall("calculator", expression), ToolLimits())
        if result.status != "ok":
            raise TraceError("calculator_error", f"{match.group(0)!r}: {result.text}")
        computed = _number(result.text)
        if computed is None or not _close(computed, value):
            raise TraceError("result_mismatch", f"{match.group(0)!r}: the calculator gives {result.text}")
        call = f"{answer[position : match.start()]}{CALL_OPEN}calculator: {expression}{CALL_CLOSE}"
        segments += [(call, True), (result_text(result.text), False)]
        position = match.end()
        visible = _VISIBLE_NUMBER.match(answer, position)
        if visible:
            if not _close(float(visible.group(0).replace(",", "")), value):
                raise TraceError("visible_number_mismatch", f"{match.group(0)!r} is followed by {visible.group(0)}")
            position = visible.end()
    segments.append((answer[position:], True))
    return _checked(Trace(uid, question.strip(), tuple(segments), len(annotations)), answer)


def plain_trace(question: str, answer: str, uid: str) -> Trace:
    """The solution with its annotations removed, as one trained segment. Only the structure is checked (a
    ``####`` line, balanced ``<<``/``>>``, the final answer): the annotations' contents are not evaluated.

    Example: ``"Natalia sold 48/2 = <<48/2=24>>24 clips.\\n#### 24"`` gives the one segment
    ``("Natalia sold 48/2 = 24 clips.\\n#### 24", True)`` and ``calls == 0``.
    """
    answer = answer.strip()
    _check_structure(answer)
    return _checked(Trace(uid, question.strip(), ((_ANNOTATION.sub("", answer), True),), 0), answer)


def convert_file(path: str | Path, form: str = "tools", limit: int | None = None) -> tuple[list[Trace], dict[str, int]]:
    """The traces of a GSM8K JSONL file's first ``limit`` rows (all when None) and the skip counts by reason.

    ``form`` is ``"tools"`` (:func:`tool_trace`) or ``"plain"`` (:func:`plain_trace`). Uids are
    ``"{file stem}-{1-based line number}"`` as in :func:`relay.data.gsm8k.load_gsm8k`; blank lines are skipped.
    A line that is not a JSON object with string ``question`` and ``answer`` raises DatasetError.
    """
    convert = {"tools": tool_trace, "plain": plain_trace}.get(form)
    if convert is None:
        raise ValueError(f"unknown form {form!r}; choose 'tools' or 'plain'")
    path = Path(path)
    traces: list[Trace] = []
    skipped: Counter[str] = Counter()
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if limit is not None and len(traces) + sum(skipped.values()) >= limit:
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("question", "answer")):
                raise DatasetError(f"{path}:{lineno}: expected a JSON object with string 'question' and 'answer'")
            try:
                traces.append(convert(row["question"], row["answer"], f"{path.stem}-{lineno}"))
            except TraceError as exc:
                skipped[exc.reason] += 1
    return traces, dict(skipped)


def main(argv: list[str] | None = None) -> None:
    """Convert a file and print ``{"converted", "skipped", "skipped_by_reason", "mean_calls"}`` as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="data/gsm8k/train.jsonl")
    parser.add_argument("--form", choices=("tools", "plain"), default="tools")
    parser.add_argument("--limit", type=int, default=None, help="rows to read (default: all)")
    args = parser.parse_args(argv)
    traces, skipped = convert_file(args.path, args.form, args.limit)
    mean_calls = sum(t.calls for t in traces) / len(traces) if traces else 0.0
    summary = {"converted": len(traces), "skipped": sum(skipped.values()), "skipped_by_reason": skipped}
    print(json.dumps({**summary, "mean_calls": round(mean_calls, 3)}))


if __name__ == "__main__":
    main()
