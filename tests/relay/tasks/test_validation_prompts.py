"""The validation prompt batch: the first N problems of data.test_path, in file order, same policy as training."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from relay.data.gsm8k import load_gsm8k
from relay.repo import REPO_ROOT
from relay.tasks.prompt_source import PromptSource, validation_prompts
from tests.relay.data.char_prompts import CharTokenizer, data_config


def _data_cfg(test_path: Path, **overrides: object) -> SimpleNamespace:
    return data_config(train_path=str(REPO_ROOT / "data/gsm8k/train.jsonl"), test_path=str(test_path), **overrides)


def test_first_n_test_problems_in_file_order() -> None:
    test_path = REPO_ROOT / "data/gsm8k/test.jsonl"
    batch = validation_prompts(_data_cfg(test_path), CharTokenizer(), limit=3)
    examples = load_gsm8k(test_path)[:3]
    assert list(batch.non_tensor["uid"]) == ["test-1", "test-2", "test-3"]
    assert list(batch.non_tensor["ground_truth"]) == [ex.ground_truth for ex in examples]
    assert list(batch.non_tensor["question"]) == [ex.question for ex in examples]
    prompt = "".join(map(chr, batch.non_tensor["raw_prompt_ids"][0]))
    assert examples[0].question in prompt and prompt.endswith("<assistant>")
    again = validation_prompts(_data_cfg(test_path), CharTokenizer(), limit=3)
    assert [list(p) for p in again.non_tensor["raw_prompt_ids"]] == [
        list(p) for p in batch.non_tensor["raw_prompt_ids"]
    ]


def test_no_limit_is_every_problem_and_overlong_ones_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "mini.jsonl"
    questions = ["What is 1+1?", "x" * 200 + " What is 2+2?", "What is 3+3?"]
    path.write_text("\n".join(json.dumps({"question": q, "answer": f"#### {i}"}) for i, q in enumerate(questions)))
    assert list(validation_prompts(_data_cfg(path), CharTokenizer()).non_tensor["uid"]) == [
        "mini-1",
        "mini-2",
        "mini-3",
    ]
    short = validation_prompts(_data_cfg(path, max_prompt_length=150), CharTokenizer(), limit=2)
    assert list(short.non_tensor["uid"]) == ["mini-1", "mini-3"]  # the next problem takes the dropped one's place


def test_from_config_still_reads_the_train_set_by_default() -> None:
    source = PromptSource.from_config(_data_cfg(REPO_ROOT / "data/gsm8k/test.jsonl"), CharTokenizer(), batch_size=2)
    assert source.examples[0].uid == "train-1"
