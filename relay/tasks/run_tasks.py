"""A run's tasks as its config sets them: which rows it reads, how each becomes a prompt, which grader grades it.

``data.task`` names the run's task (:mod:`relay.tasks.registry`); ``data.fields`` maps Relay's roles (``prompt``,
``answer``, and optionally ``data_source`` and ``uid``) to the file's columns where they differ from the task's;
``data.system_prompt`` / ``data.user_template`` replace the task's prompt; ``data.chat_template=false`` sends the
user turn as plain text (for base models). With ``data.fields.data_source`` mapped, each row names its own task
(through ``data.sources`` when the names differ, verl's ``data_source`` idea): it is prompted and graded as that
task. A generated task (``countdown``) reads no file when ``data.train_path`` / ``data.test_path`` are null: its
first ``data.generate.test_size`` distinct problems are the validation split (``data.generate.distinct_test``;
a sum and its terms reordered are one problem, :mod:`relay.tasks.problem_key`) and the next ``train_size`` rows,
less any that is a validation problem, the training split.

Worked example: ``data.task=math``, ``data.fields.prompt=problem``, ``data.fields.data_source=source``,
``data.sources.openai/gsm8k=gsm8k``: a row ``{"problem": "...", "answer": "#### 4", "source": "openai/gsm8k"}`` is
read as GSM8K (ground truth ``4``, GSM8K's prompt and grader); a row with ``"source": "math"`` as the run's task.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.data.files import pick_fields, read_records
from relay.data.gsm8k import PROMPT_TEMPLATES, DatasetError, Example
from relay.tasks.problem_key import problem_key
from relay.tasks.registry import TASKS, get_task
from relay.tasks.task import REQUIRED_ROLES, Task

# A distinct validation split draws at most this many times data.generate.test_size rows (and at least 1000).
DISTINCT_DRAWS = 20


def first_distinct(rows: list[Example], size: int) -> tuple[list[Example], int]:
    """The first ``size`` rows of ``rows`` that are different problems, and how many rows that took.

    Worked example: questions "1 + 2", "2 + 1", "3 + 4" and ``size=2`` give the rows "1 + 2", "3 + 4" and 3.
    """
    seen: set[str] = set()
    kept: list[Example] = []
    for i, row in enumerate(rows):
        key = problem_key(row.question)
        if key not in seen:
            seen.add(key)
            kept.append(row)
            if len(kept) == size:
                return kept, i + 1
    return kept, len(rows)


@dataclass(frozen=True)
class RunTasks:
    """The run's task, its overrides and the sources of a mixed dataset (see the module docstring)."""

    task: Task
    fields: Mapping[str, str | None]
    sources: Mapping[str, str]
    user_template: str | None
    system_prompt: str | None
    chat_template: bool
    generate: Mapping[str, Any]
    # The generator options of every split whose validation rows training must not see: a curriculum's levels (a
    # level's training rows may not hold another level's validation problem either), else data.generate.options.
    held_out_options: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_config(cls, data_cfg: Any) -> RunTasks:
        """From ``data.*``; ValueError naming the key on an unknown task or a source mapped to one."""
        task = get_task(data_cfg.task)
        sources = {str(k): str(v) for k, v in dict(data_cfg.sources).items()}
        for value, name in sources.items():
            get_task(name, key=f"data.sources.{value}")
        template = data_cfg.user_template
        if template is None and task.name == "gsm8k":
            template = PROMPT_TEMPLATES[data_cfg.prompt_template]
        return cls(
            task=task,
            fields={**task.fields, **{k: v for k, v in dict(data_cfg.fields).items() if v is not None}},
            sources=sources,
            user_template=template,
            system_prompt=data_cfg.system_prompt,
            chat_template=bool(data_cfg.chat_template),
            generate=dict(data_cfg.generate),
            held_out_options=tuple(level["options"] for level in data_cfg.curriculum.levels),
        )

    def task_of(self, example: Example) -> Task:
        """The task ``example`` is prompted and graded as."""
        return self.task if example.data_source is None else TASKS[example.data_source]

    def prompt(self, example: Example) -> list[dict] | str:
        """The prompt of ``example`` before any tokenizer: its task's chat messages, or the user turn alone as text
        with ``data.chat_template=false``. The run's overrides apply to rows of the run's task."""
        task = self.task_of(example)
        own = task is self.task
        template = self.user_template if own else None
        if not self.chat_template:
            return task.prompt_text(example.question, template)
        return task.messages(example.question, template, self.system_prompt if own else None)

    def render(self, example: Example, tokenizer: Any) -> str:
        """The prompt text of ``example``: :meth:`prompt` through the tokenizer's chat template (when it is
        messages)."""
        prompt = self.prompt(example)
        if isinstance(prompt, str):
            return prompt
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)

    def grading(self, grader: str | None = None, grader_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the reward role grades with: ``{"task": data.task, "graders": {task: grader}, "options": {grader:
        options}}`` over every task this run can meet; ``grader`` (``reward.grader``) replaces the run's task's, and
        ``grader_options`` (``reward.grader_options``) are that grader's options.

        Worked example: ``data.task=math``, ``reward.grader=regex``, ``reward.grader_options.pattern="= (.+)"`` give
        ``{"task": "math", "graders": {"math": "regex"}, "options": {"regex": {"pattern": "= (.+)"}}}``.
        """
        names = {self.task.name, *self.sources.values()}
        if self.fields.get("data_source"):
            names |= set(TASKS)  # a row may name any task directly
        graders = {name: TASKS[name].grader for name in sorted(names)}
        if grader is not None:
            graders[self.task.name] = grader
        options = {graders[self.task.name]: dict(grader_options)} if grader_options else {}
        return {"task": self.task.name, "graders": graders, "options": options}

    def read(self, path: str | None, split: str, quiet: bool = False) -> list[Example]:
        """The examples of ``path`` (``split`` is ``train`` or ``test``); a generated task's rows when ``path`` is
        None (training rows that repeat a validation question dropped, and counted on stderr unless ``quiet``).
        Raises DatasetError naming the file, the row and the field on bad input."""
        if path is None:
            return self._generated(split, quiet)
        return [self._example(where, record) for where, record in read_records(path)]

    def _generated(self, split: str, quiet: bool) -> list[Example]:
        if self.task.generate is None:
            raise DatasetError(
                f"data.{split}_path is null but data.task={self.task.name} reads files; set data.{split}_path "
                "(a JSONL, Parquet or save_to_disk dataset)"
            )
        g = self.generate
        train_size, test_seed = int(g["train_size"]), g.get("test_seed")
        held_out, drawn = self._held_out(int(g["seed"] if test_seed is None else test_seed))
        if split == "test":
            return held_out
        if test_seed is None:  # one seed: the training rows follow the rows the validation split drew
            training = self._generated_rows(drawn + train_size, int(g["seed"]))[drawn:]
        else:
            training = self._generated_rows(train_size, int(g["seed"]))
        seen = {problem_key(ex.question) for ex in held_out}
        for options in self.held_out_options:  # the other levels' validation rows
            seen |= {problem_key(ex.question) for ex in self._held_out(int(test_seed or g["seed"]), options)[0]}
        kept = [ex for ex in training if problem_key(ex.question) not in seen]
        if len(kept) < len(training) and not quiet:
            print(
                f"data: {len(training) - len(kept)} of {len(training)} generated training problems dropped: each is "
                "a validation problem, or one with its terms reordered (relay/tasks/problem_key.py)",
                file=sys.stderr,
            )
        return kept

    def _held_out(self, seed: int, options: Mapping[str, Any] | None = None) -> tuple[list[Example], int]:
        """The validation rows of ``seed`` and how many rows of the seed's stream they took. With
        ``data.generate.distinct_test`` each is a different problem (:func:`relay.tasks.problem_key.problem_key`):
        the first ``test_size`` distinct problems of the stream, so a repeat is skipped, not counted twice.
        DatasetError when the stream has fewer distinct problems in :data:`DISTINCT_DRAWS` times ``test_size``
        rows."""
        size = int(self.generate["test_size"])
        if not self.generate.get("distinct_test", True):
            return self._generated_rows(size, seed, options), size
        limit = max(DISTINCT_DRAWS * size, 1000)
        count = size
        while True:
            rows = self._generated_rows(count, seed, options)
            distinct, drawn = first_distinct(rows, size)
            if len(distinct) == size or count >= limit:
                break
            count = min(2 * count, limit)
        if len(distinct) < size:
            raise DatasetError(
                f"data.generate.test_size={size}: the {self.task.name} generator (seed {seed}) gave only "
                f"{len(distinct)} distinct problems in {count} rows; lower data.generate.test_size, widen the task's "
                "data.generate.options, or set data.generate.distinct_test=false to allow repeats"
            )
        return distinct, drawn

    def _generated_rows(self, count: int, seed: int, options: Mapping[str, Any] | None = None) -> list[Example]:
        rows = self.task.generate(count, seed, self.generate["options"] if options is None else options)
        where = f"{self.task.name} (generated, seed {seed}) row"
        return [self._example(f"{where} {i}", row) for i, row in enumerate(rows, start=1)]

    def _example(self, where: str, record: dict) -> Example:
        picked = pick_fields(record, where, self.fields, REQUIRED_ROLES)
        task = self.task
        data_source = task.name if self.fields.get("data_source") else None  # a mixed dataset names every row's
        if "data_source" in picked:
            value = str(picked["data_source"])
            data_source = self.sources.get(value, value)
            if data_source not in TASKS:
                column = self.fields["data_source"]
                raise DatasetError(
                    f"{where}: data_source {value!r} (field '{column}') names no task; map it with "
                    f"data.sources.{value}=<task>, one of {sorted(TASKS)}"
                )
            task = TASKS[data_source]
        prompt = picked["prompt"]
        if not isinstance(prompt, str):
            raise DatasetError(
                f"{where}: field '{self.fields['prompt']}' (data.fields.prompt) is a {type(prompt).__name__}, not "
                "text; point data.fields.prompt at the column that holds the problem"
            )
        try:
            ground_truth = task.ground_truth(str(picked["answer"]))
        except ValueError as e:
            raise DatasetError(
                f"{where}: field '{self.fields['answer']}' (data.fields.answer): {e} (task {task.name}: "
                f"{task.description})"
            ) from None
        uid = str(picked["uid"]) if "uid" in picked else _default_uid(where)
        subset = str(picked["subset"]) if "subset" in picked else None
        return Example(uid, prompt.strip(), ground_truth, data_source, subset)


def check_datasets(data_cfg: Any) -> dict[str, int]:
    """Read every row of both splits through the run's tasks (``trainer.py`` does, before Ray starts): the rows of
    each split, or DatasetError / FileNotFoundError naming the file, the row and the field."""
    tasks = RunTasks.from_config(data_cfg)
    paths = {"train": data_cfg.train_path, "test": data_cfg.test_path}
    return {split: len(tasks.read(path, split, quiet=True)) for split, path in paths.items()}


def reward_role_config(cfg: Any) -> dict[str, Any]:
    """What a reward actor is built with: the ``reward`` section and ``grading``, the grader of each task the run's
    rows can name (:meth:`RunTasks.grading`, with ``reward.grader`` and ``reward.grader_options``)."""
    from omegaconf import OmegaConf

    grading = RunTasks.from_config(cfg.data).grading(cfg.reward.grader, cfg.reward.grader_options)
    return {**OmegaConf.to_container(cfg.reward, resolve=True), "grading": grading}


def _default_uid(where: str) -> str:
    """``"{file stem}-{line or row}"``: ``data/gsm8k/test.jsonl:12`` -> ``test-12``, ``x.parquet row 3`` -> ``x-3``."""
    match = re.fullmatch(r"(.*?)(?::| row )(\d+)", where)
    if match is None:
        raise ValueError(f"no row number in {where!r}")
    return f"{Path(match.group(1)).stem}-{match.group(2)}"
