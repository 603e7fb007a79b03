"""relay.tasks.run_tasks: a run's rows read through its task (GSM8K unchanged), user files in three formats with a
field mapping, mixed sources, a generated task's splits, and the errors that name file, row and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from relay.config.data_schema import DataConfig
from relay.data.gsm8k import DatasetError, Example, build_messages, load_gsm8k
from relay.repo import REPO_ROOT
from relay.tasks.run_tasks import RunTasks
from tests.relay.data.char_prompts import CharTokenizer

MATH_ROWS = [
    {"problem": "What is 1/2 + 1/4?", "solution": "We add: $\\boxed{\\frac{3}{4}}$.", "src": "math"},
    {"problem": "Simplify sqrt(12).", "solution": "2\\sqrt{3}", "src": "math"},
    {"problem": "Tom has 3 apples and buys 2. How many?", "solution": "3 + 2 = 5\n#### 5", "src": "openai/gsm8k"},
]


def _data(**fields: object):
    return OmegaConf.merge(OmegaConf.structured(DataConfig), fields)


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _arrow_dir(path: Path, rows: list[dict]) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


def test_gsm8k_rows_and_prompts_are_unchanged() -> None:
    """The GSM8K task reads the shipped file into the examples load_gsm8k reads, and renders the same prompts."""
    path = str(REPO_ROOT / "data/gsm8k/test.jsonl")
    tasks = RunTasks.from_config(_data(prompt_template="plain"))
    assert tasks.read(path, "test") == load_gsm8k(path)
    example = load_gsm8k(path)[0]
    tok = CharTokenizer()
    expected = tok.apply_chat_template(build_messages(example.question, "plain"), True, False)
    assert tasks.render(example, tok) == expected


@pytest.mark.parametrize("write", [_jsonl, _parquet, _arrow_dir], ids=["jsonl", "parquet", "save_to_disk"])
def test_a_math_file_in_each_format_with_a_field_mapping(write, tmp_path: Path) -> None:
    suffix = {"_jsonl": ".jsonl", "_parquet": ".parquet"}.get(write.__name__, "")
    path = write(tmp_path / f"mine{suffix}", MATH_ROWS[:2])
    tasks = RunTasks.from_config(_data(task="math", fields={"answer": "solution"}))
    examples = tasks.read(str(path), "train")
    assert examples == [
        Example(uid="mine-1", question="What is 1/2 + 1/4?", ground_truth="\\frac{3}{4}"),
        Example(uid="mine-2", question="Simplify sqrt(12).", ground_truth="2\\sqrt{3}"),
    ]
    messages = tasks.task.messages(examples[0].question)
    assert messages[-1]["content"].endswith("put the final answer in \\boxed{}.")


def test_mixed_sources_are_read_and_graded_as_their_own_tasks(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mixed.jsonl", MATH_ROWS)
    data = _data(task="math", fields={"answer": "solution", "data_source": "src"}, sources={"openai/gsm8k": "gsm8k"})
    tasks = RunTasks.from_config(data)
    examples = tasks.read(str(path), "train")
    assert [(e.data_source, e.ground_truth) for e in examples] == [
        ("math", "\\frac{3}{4}"),
        ("math", "2\\sqrt{3}"),
        ("gsm8k", "5"),
    ]
    tok = CharTokenizer()
    assert "write the final answer as '#### <number>'" in tasks.render(examples[2], tok)  # GSM8K's own prompt
    assert "\\boxed{}" in tasks.render(examples[0], tok)
    grading = tasks.grading()
    assert grading["task"] == "math" and grading["graders"]["math"] == "math" and grading["graders"]["gsm8k"] == "gsm8k"


def test_an_unknown_source_names_the_row_the_value_and_the_fix(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "mixed.jsonl", MATH_ROWS)
    tasks = RunTasks.from_config(_data(task="math", fields={"answer": "solution", "data_source": "src"}))
    with pytest.raises(DatasetError, match=r"mixed.jsonl:3: data_source 'openai/gsm8k' \(field 'src'\) names no task"):
        tasks.read(str(path), "train")


def test_a_missing_field_names_the_file_the_row_and_the_field(tmp_path: Path) -> None:
    rows = [{"problem": "a", "answer": "1"}, {"problem": "b"}]
    path = _parquet(tmp_path / "bad.parquet", rows)
    tasks = RunTasks.from_config(_data(task="math"))
    with pytest.raises(DatasetError, match=r"bad.parquet row 2: field 'answer' is null \(data.fields.answer=answer\)"):
        tasks.read(str(path), "train")


def test_an_ungradable_answer_names_the_row_and_the_task(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "g.jsonl", [{"question": "q", "answer": "just 3"}])
    with pytest.raises(DatasetError, match=r"g.jsonl:1: field 'answer' \(data.fields.answer\): 'answer' has no '####'"):
        RunTasks.from_config(_data()).read(str(path), "train")


def test_the_generated_task_has_disjoint_deterministic_splits() -> None:
    data = _data(task="countdown", train_path=None, test_path=None, generate={"train_size": 300, "test_size": 50})
    tasks = RunTasks.from_config(data)
    test, train = tasks.read(None, "test"), tasks.read(None, "train")
    assert len(test) == 50 and 250 <= len(train) <= 300
    assert not {e.question for e in test} & {e.question for e in train}
    assert tasks.read(None, "train") == train
    assert test[0].uid == "countdown-0-0" and "=" in test[0].ground_truth
    from relay.run.manifest import split_fingerprints

    recipe = split_fingerprints(OmegaConf.to_container(data))
    assert [r["generated"] for r in recipe] == ["countdown", "countdown"] and recipe[0]["train_size"] == 300


def test_a_file_task_without_a_path_is_refused() -> None:
    with pytest.raises(DatasetError, match="data.train_path is null but data.task=math reads files"):
        RunTasks.from_config(_data(task="math", train_path=None)).read(None, "train")


def test_overrides_and_raw_prompts() -> None:
    data = _data(task="exact", system_prompt="Be brief.", user_template="Q: {prompt}\nA:", chat_template=False)
    tasks = RunTasks.from_config(data)
    example = Example(uid="u", question=" Capital of France? ", ground_truth="Paris")
    assert tasks.render(example, CharTokenizer()) == "Q: Capital of France?\nA:"
    chat = RunTasks.from_config(_data(task="exact", system_prompt="Be brief."))
    assert chat.render(example, CharTokenizer()).startswith("<system>Be brief.<user>Capital of France?")


def test_reward_grader_override_and_options() -> None:
    grading = RunTasks.from_config(_data(task="math")).grading("regex", {"pattern": "= (.+)"})
    assert grading == {"task": "math", "graders": {"math": "regex"}, "options": {"regex": {"pattern": "= (.+)"}}}
