"""A task: how a dataset's rows are read, how a row becomes a prompt, and how a response to it is graded.

A :class:`Task` is data, not code paths: its default columns (``fields``), its chat prompt (a system prompt and a
user template with ``{prompt}``), the function that turns a row's answer column into the grader's ground truth, the
name of its grader (:data:`relay.scoring.graders.GRADERS`), and, for a generated task, the generator of its rows.
Evaluation is the same for every task (``relay/evaluation``: greedy accuracy, pass@k, mean@k, and the accuracy of
each source when a dataset mixes several). The shipped tasks are in :mod:`relay.tasks.registry`.

Worked example (the ``math`` task): the row ``{"problem": "What is 1/2 + 1/4?", "answer": "\\frac{3}{4}"}`` becomes
the messages ``[system: "You are a careful math tutor.", user: "What is 1/2 + 1/4?\\nPut the final answer in
\\boxed{}."]`` and the ground truth ``\\frac{3}{4}``; the response ``"... so \\boxed{0.75}"`` grades 1.0 (the
``math`` grader compares ``0.75`` and ``\\frac{3}{4}`` with math-verify).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Relay's names for a row's columns: the text the prompt is made of, the answer it is graded against, and optional
# ones: the source that picks the row's task in a mixed dataset, a stable id, and the subset (a generator, a
# difficulty level) that validation reports on its own.
FIELD_ROLES = ("prompt", "answer", "data_source", "uid", "subset")
REQUIRED_ROLES = ("prompt", "answer")

# A generated task's rows, as a file would hold them: (count, seed, options) -> records; row i the same whatever
# the count, so a longer run extends a shorter one's data.
Generator = Callable[[int, int, Mapping[str, Any]], list[dict[str, Any]]]


def stripped(answer: str) -> str:
    """A ground truth that is the answer column itself, stripped; empty is an error."""
    text = str(answer).strip()
    if not text:
        raise ValueError("the answer is empty")
    return text


@dataclass(frozen=True)
class Task:
    """One task (see the module docstring). ``ground_truth(answer)`` raises ValueError with the problem when a
    row's answer cannot be graded (e.g. a GSM8K answer without ``####``)."""

    name: str
    description: str
    grader: str
    user_template: str  # the user turn, with {prompt}
    system_prompt: str | None = None  # None: no system turn
    ground_truth: Callable[[str], str] = stripped  # the answer column -> the grader's ground truth
    fields: Mapping[str, str] = field(default_factory=lambda: {"prompt": "prompt", "answer": "answer"})
    generate: Generator | None = None  # a generated task's rows: its files are optional
    # A generated task's checks of data.generate (problems naming their keys), run before anything starts.
    check_generate: Callable[[Any], list[str]] | None = None
    generator_package: str | None = None  # the package whose version a generated split's recipe records
    answer_text: Callable[[str], str] = str  # the answer as text, from a ground truth (the majority baseline)

    def messages(self, prompt: str, user_template: str | None = None, system_prompt: str | None = None) -> list[dict]:
        """The chat messages of one row; ``user_template``/``system_prompt`` replace the task's when given.

        >>> from relay.tasks.registry import TASKS
        >>> TASKS["exact"].messages("Capital of France?")[-1]["content"]
        'Capital of France?\\nWrite the final answer as \\\\boxed{<answer>}.'
        """
        template = self.user_template if user_template is None else user_template
        system = self.system_prompt if system_prompt is None else system_prompt
        user = {"role": "user", "content": template.replace("{prompt}", prompt.strip())}
        return [{"role": "system", "content": system}, user] if system else [user]

    def prompt_text(self, prompt: str, user_template: str | None = None) -> str:
        """The prompt without a chat template (``data.chat_template=false``, for base models): the user turn."""
        return (self.user_template if user_template is None else user_template).replace("{prompt}", prompt.strip())
