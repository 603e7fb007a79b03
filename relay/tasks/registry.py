"""The shipped tasks, by the name ``data.task`` (and a mixed dataset's ``data_source``) picks them with.

- ``gsm8k``: grade-school word problems (``data/gsm8k``); columns ``question`` and ``answer`` (a solution ending in
  ``#### <number>``); the prompt is one of ``data.prompt_template``'s GSM8K templates; graded by ``gsm8k`` (answer
  extraction + math-verify).
- ``math``: problems with LaTeX final answers (MATH, AIME-style files); columns ``problem`` and ``answer`` (the
  answer itself, or a solution whose last ``\\boxed{}`` holds it); graded by ``math`` (the response's last
  ``\\boxed{}`` against the answer with math-verify).
- ``exact``: short answers compared as text (names, options, words); columns ``prompt`` and ``answer``; graded by
  ``exact`` (case and spacing ignored).
- ``countdown``: reach a target from given numbers with + - x / (:mod:`relay.tasks.countdown`), generated from a
  seed, so it needs no file; graded by ``countdown`` (the expression is parsed, never run).
- ``reasoning_gym``: reasoning-gym's procedural datasets (:mod:`relay.tasks.reasoning_gym`), generated from two
  seeds; graded by ``reasoning_gym`` (each dataset's own verifier, binary by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.data.gsm8k import PROMPT_TEMPLATES, SYSTEM_PROMPT, gsm8k_ground_truth
from relay.scoring.answer import last_boxed
from relay.scoring.reasoning_gym import answer_of, decode_ground_truth
from relay.tasks.task import Task, stripped

BOXED = "\\boxed{"


def boxed_or_whole(answer: str) -> str:
    """The content of the last ``\\boxed{...}`` of ``answer`` when it has one, else ``answer`` stripped: a MATH-style
    solution and a bare answer give the same ground truth.

    >>> boxed_or_whole("so $x = \\\\boxed{\\\\frac{1}{2}}$."), boxed_or_whole(" 42 ")
    ('\\\\frac{1}{2}', '42')
    """
    text = stripped(answer)
    if BOXED not in text:
        return text
    content = last_boxed(text)
    if content is None:
        raise ValueError(f"unbalanced braces after \\boxed{{ in {text[text.rfind(BOXED) : text.rfind(BOXED) + 40]!r}")
    return stripped(content)


def reasoning_gym_truth(answer: str) -> str:
    """A reasoning-gym row's ground truth: its encoded item, checked (ValueError naming the problem)."""
    decode_ground_truth(answer)
    return answer


def _generate_countdown(count: int, seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Countdown rows as a file would hold them: ``uid``, ``question`` and ``answer`` (the ground truth)."""
    from relay.tasks.countdown import countdown_ground_truth, countdown_question, generate_countdown

    return [
        {
            "uid": r["uid"],
            "question": countdown_question(r["numbers"], r["target"]),
            "answer": countdown_ground_truth(r["numbers"], r["target"]),
        }
        for r in generate_countdown(count, seed, **dict(options))
    ]


def _generate_reasoning_gym(count: int, seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    from relay.tasks.reasoning_gym import generate_reasoning_gym

    return generate_reasoning_gym(count, seed, options)


def _check_reasoning_gym(generate: Any) -> list[str]:
    from relay.tasks.reasoning_gym import check_options

    return check_options(generate)


MATH_SYSTEM_PROMPT = "You are a careful math tutor."
BOXED_ANSWER_TEMPLATE = "{prompt}\nWrite the final answer as \\boxed{<answer>}."
SHIPPED_TASKS = (
    Task(
        name="gsm8k",
        description="grade-school word problems with a numeric answer after '####'",
        grader="gsm8k",
        user_template=PROMPT_TEMPLATES["concise"],  # data.prompt_template picks another GSM8K template
        system_prompt=SYSTEM_PROMPT,
        ground_truth=gsm8k_ground_truth,
        fields={"prompt": "question", "answer": "answer"},
    ),
    Task(
        name="math",
        description="math problems with a LaTeX final answer, written in \\boxed{}",
        grader="math",
        user_template="{prompt}\nSolve it step by step, then put the final answer in \\boxed{}.",
        system_prompt=MATH_SYSTEM_PROMPT,
        ground_truth=boxed_or_whole,
        fields={"prompt": "problem", "answer": "answer"},
    ),
    Task(
        name="exact",
        description="short answers compared as text (case and spacing ignored)",
        grader="exact",
        user_template=BOXED_ANSWER_TEMPLATE,
    ),
    Task(
        name="countdown",
        description="reach a target from given numbers with + - * / (generated from a seed)",
        grader="countdown",
        user_template="{prompt}\nThink briefly, then write the expression alone in \\boxed{}, e.g. \\boxed{(7-3)*5}.",
        fields={"prompt": "question", "answer": "answer", "uid": "uid"},
        generate=_generate_countdown,
    ),
    Task(
        name="reasoning_gym",
        description="reasoning-gym's procedural problems, graded by each dataset's verifier (generated from seeds)",
        grader="reasoning_gym",
        user_template=BOXED_ANSWER_TEMPLATE,
        ground_truth=reasoning_gym_truth,
        fields={"prompt": "question", "answer": "answer", "uid": "uid", "subset": "dataset"},
        generate=_generate_reasoning_gym,
        check_generate=_check_reasoning_gym,
        generator_package="reasoning-gym",
        answer_text=answer_of,
    ),
)
TASKS: dict[str, Task] = {task.name: task for task in SHIPPED_TASKS}


def get_task(name: str, key: str = "data.task") -> Task:
    """The task called ``name``; ValueError naming ``key``, the value and the choices otherwise."""
    if name not in TASKS:
        raise ValueError(f"{key}={name!r}: no such task; choose one of {sorted(TASKS)}")
    return TASKS[name]
