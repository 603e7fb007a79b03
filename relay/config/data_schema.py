"""The schema of what a run trains on: ``data`` (files or a generated task, its columns, its splits, a curriculum)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FieldsConfig:
    """The dataset's column for each of Relay's roles; null: the task's default column (docs/tasks.md)."""

    prompt: str | None = None  # the problem text (gsm8k: question, math: problem, exact: prompt)
    answer: str | None = None  # what the response is graded against (gsm8k: answer, math: answer)
    data_source: str | None = None  # a column naming each row's task (a mixed dataset); null: every row is data.task
    uid: str | None = None  # a stable id per row; null: "<file stem>-<line or row>"
    subset: str | None = None  # a column naming each row's part (a level, a source): validation reports each


@dataclass
class GenerateConfig:
    """A generated task's rows (countdown, reasoning_gym with null paths): the first test_size rows validate and the
    next train_size train, or with test_seed, test_size rows of test_seed validate and train_size rows of seed train;
    training rows that repeat a validation question are dropped (docs/tasks.md)."""

    train_size: int = 5000  # training rows generated
    test_size: int = 200  # validation rows generated
    seed: int = 0  # row i is drawn from (seed, i): the same rows in every run
    test_seed: int | None = None  # the validation rows' seed; null: the first rows of seed (reasoning_gym needs one)
    # Each validation row a different problem (a repeat, or a sum with its terms reordered, is skipped; training rows
    # that are one of them are dropped: relay/tasks/problem_key.py); false: the first test_size rows as drawn.
    distinct_test: bool = True
    # The generator's own knobs (relay/tasks/countdown.py; reasoning_gym: datasets, relay/tasks/reasoning_gym.py).
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CurriculumConfig:
    """A generated task's difficulty rising as the model masters each level (relay/tasks/curriculum.py)."""

    # Easiest first; each {name, options}: the level's generator options (they replace data.generate.options).
    # Empty: no curriculum.
    levels: list[Any] = field(default_factory=list)
    # The mean training accuracy over the window that starts the next level; 0: each level lasts `window` steps.
    promote_at: float = 0.8
    window: int = 3  # steps at a level whose training accuracy is averaged


@dataclass
class RevisitUnsolvedConfig:
    """Unsolved prompts revisited in later steps (relay/data/revisit.py): a prompt whose samples were all wrong comes
    back ``delay`` step draws later, as part of at most ``share`` of a step's prompts, up to ``times`` times."""

    enable: bool = False  # queue the unsolved prompts and revisit them in later steps
    share: float = 0.25  # at most this share of a step's prompts is taken from the queue (rounded down)
    delay: int = 4  # step draws an unsolved prompt waits before it may come back
    times: int = 2  # visits in a row a prompt may have while it stays unsolved
    newest_first: bool = False  # take the ready prompts queued last (those the current policy failed) first
    capacity: int = 0  # the most prompts waiting; past it the earliest queued leave (0: no bound)


@dataclass
class DataConfig:
    # how rows are read, prompted and graded: gsm8k | math | exact | countdown | reasoning_gym (docs/tasks.md)
    task: str = "gsm8k"
    # The training rows: a JSONL file, a Parquet file or a datasets save_to_disk directory; null: a generated
    # task's rows (data.generate).
    train_path: str | None = "data/gsm8k/train.jsonl"
    test_path: str | None = "data/gsm8k/test.jsonl"  # held-out problems for validation and driver.evaluate
    fields: FieldsConfig = field(default_factory=FieldsConfig)
    sources: dict[str, str] = field(default_factory=dict)  # a data_source value -> the task it is (mixed datasets)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    revisit_unsolved: RevisitUnsolvedConfig = field(default_factory=RevisitUnsolvedConfig)
    prompt_template: str = "concise"  # data.task=gsm8k: its chat prompt (relay/data/gsm8k.py PROMPT_TEMPLATES)
    system_prompt: str | None = None  # replaces the task's system prompt ("": none)
    user_template: str | None = None  # replaces the task's user turn; {prompt} is the row's problem
    chat_template: bool = True  # false: the user turn as plain text, no chat template (base models)
    max_prompt_length: int = 256  # prompt tokens at most; longer: filter_overlong_prompts, truncation
    max_response_length: int = 256  # new tokens per sample
    # Prompts are padded to at least this many tokens (a shape knob: fewer compiled shapes).
    min_padded_prompt_length: int = 0
    # True: prompts over max_prompt_length are dropped at load time (and counted in the log).
    # False: they are handled by `truncation`.
    filter_overlong_prompts: bool = True
    truncation: str = "error"  # over-long prompts when not filtered: error (refuse) | left | right (cut that side)
    # Character cap on a prompt's question text, checked before tokenizing (0: no cap); over-long
    # questions follow filter_overlong_prompts / truncation like over-long token counts.
    max_prompt_chars: int = 0
    shuffle_seed: int = 0  # epoch e's data order is the permutation drawn from (shuffle_seed, e)
    # Keep the rendered prompts' token ids under $RELAY_HOME/prompt-cache (relay/tasks/prompt_cache.py): a run on the
    # same model, data and settings starts without tokenising them again.
    cache_prompts: bool = True
