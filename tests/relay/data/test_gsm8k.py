"""Tests for relay.data.gsm8k: loading, error messages, prompts and the resumable batcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.data import (
    PROMPT_TEMPLATES,
    DatasetError,
    Example,
    PromptBatcher,
    build_messages,
    load_gsm8k,
)
from relay.repo import REPO_ROOT

GOOD = json.dumps({"question": "What is 2+2?", "answer": "2+2=<<2+2=4>>4\n#### 4"})


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "mini.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _examples(n: int) -> list[Example]:
    return [Example(uid=f"x-{i}", question=f"q{i}", ground_truth=str(i)) for i in range(n)]


def test_load_real_splits() -> None:
    train = load_gsm8k(REPO_ROOT / "data/gsm8k/train.jsonl")
    test = load_gsm8k(REPO_ROOT / "data/gsm8k/test.jsonl")
    assert (len(train), len(test)) == (7473, 1319)
    assert test[0] == Example(uid="test-1", question=test[0].question, ground_truth="18")
    assert test[0].question.startswith("Janet")
    assert len({e.uid for e in train}) == len(train)
    assert all("," not in e.ground_truth and e.ground_truth == e.ground_truth.strip() for e in train + test)


def test_commas_removed_and_blank_lines_skipped(tmp_path: Path) -> None:
    answer = json.dumps({"question": " Big? ", "answer": "lots\n#### 1,450,000 "})
    examples = load_gsm8k(_write(tmp_path, GOOD, "", answer))
    assert [e.uid for e in examples] == ["mini-1", "mini-3"]
    assert examples[1].ground_truth == "1450000"
    assert examples[1].question == "Big?"


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"question": "q"}), "missing key 'answer'"),
        (json.dumps({"answer": "#### 3"}), "missing key 'question'"),
        (json.dumps({"question": "q", "answer": "just 3"}), "no '####'"),
        (json.dumps({"question": "q", "answer": "3 ####  "}), "nothing after '####'"),
        (json.dumps({"question": 5, "answer": "#### 3"}), "'question' must be a non-empty string"),
        (json.dumps(["q", "#### 3"]), "expected a JSON object"),
    ],
)
def test_malformed_line_names_path_and_line(tmp_path: Path, bad_line: str, problem: str) -> None:
    path = _write(tmp_path, GOOD, bad_line, GOOD)
    with pytest.raises(DatasetError) as info:
        load_gsm8k(path)
    message = str(info.value)
    assert f"{path}:2: " in message
    assert problem in message
    assert "'#### <number>'" in message  # says how to fix it
    assert isinstance(info.value, ValueError)


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "", "  ")
    with pytest.raises(DatasetError, match=f"{path}:1: file has no examples"):
        load_gsm8k(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError) as info:
        load_gsm8k(path)
    assert str(path) in str(info.value)
    assert "data/gsm8k" in str(info.value)


@pytest.mark.parametrize("template", sorted(PROMPT_TEMPLATES))
def test_build_messages(template: str) -> None:
    messages = build_messages("  How many eggs?\n", template)
    assert [m["role"] for m in messages] == ["system", "user"]
    if template == "question":  # the question alone: the format is learned from the reward
        assert messages[1]["content"] == "How many eggs?"
        return
    assert messages[1]["content"].startswith("How many eggs?\n")
    if template == "guideline":  # solver mode: advice for the solver, no answer of its own
        assert "Do not solve it" in messages[1]["content"] and "####" not in messages[1]["content"]
    else:
        assert "'#### <number>'" in messages[1]["content"]
    if template == "tools":  # the call syntax shown once, and its result (relay/agent/tool_call.py)
        assert "<tool_call>calculator: 48 / 2</tool_call>" in messages[1]["content"]
        assert "<tool_result>24</tool_result>" in messages[1]["content"]
    budget = 320 if template == "tools" else 200  # prompts cost tokens; showing a call costs ~120 characters
    assert len(messages[0]["content"]) + len(messages[1]["content"]) < budget


def test_build_messages_default_and_unknown() -> None:
    assert build_messages("q") == build_messages("q", "concise")
    with pytest.raises(ValueError, match="concise"):
        build_messages("q", "verbose")


def test_batcher_covers_each_epoch_once_and_wraps() -> None:
    examples = _examples(10)
    batcher = PromptBatcher(examples, batch_size=4, seed=0)
    batches = [batcher.next_batch() for _ in range(5)]  # 20 items = exactly two epochs
    assert all(len(b) == 4 for b in batches)
    flat = [e.uid for b in batches for e in b]
    assert sorted(flat[:10]) == sorted(e.uid for e in examples)
    assert sorted(flat[10:]) == sorted(e.uid for e in examples)
    assert flat[:10] != flat[10:]  # a new permutation per epoch
    assert batcher.state_dict()["epoch"] == 1 and batcher.state_dict()["position"] == 10


def test_batcher_is_deterministic_per_seed() -> None:
    def uids(seed: int) -> list[str]:
        batcher = PromptBatcher(_examples(50), batch_size=7, seed=seed)
        return [e.uid for _ in range(20) for e in batcher.next_batch()]

    assert uids(3) == uids(3)
    assert uids(3) != uids(4)


def test_batcher_resume_continues_exactly() -> None:
    examples = _examples(13)
    reference = PromptBatcher(examples, batch_size=5, seed=7)
    expected = [reference.next_batch() for _ in range(9)]
    first = PromptBatcher(examples, batch_size=5, seed=7)
    for _ in range(4):
        first.next_batch()
    state = json.loads(json.dumps(first.state_dict()))  # checkpoints are serialised
    resumed = PromptBatcher(examples, batch_size=5, seed=7)
    resumed.load_state_dict(state)
    assert [resumed.next_batch() for _ in range(5)] == expected[4:]


def test_batcher_rejects_state_for_other_data() -> None:
    state = PromptBatcher(_examples(13), batch_size=5, seed=7).state_dict()
    with pytest.raises(ValueError, match="13 examples"):
        PromptBatcher(_examples(12), batch_size=5, seed=7).load_state_dict(state)


def test_batch_size_larger_than_dataset() -> None:
    with pytest.raises(ValueError) as info:
        PromptBatcher(_examples(3), batch_size=8, seed=0)
    assert "8" in str(info.value) and "3" in str(info.value)
    assert len(PromptBatcher(_examples(3), batch_size=3, seed=0).next_batch()) == 3


def test_batcher_extra_draws_continue_the_same_order() -> None:
    """Dynamic sampling draws odd-sized extra batches; they continue the cursor as one long stream."""
    examples = _examples(11)
    stream = PromptBatcher(examples, batch_size=1, seed=5)
    expected = [e.uid for _ in range(15) for e in stream.next_batch()]
    batcher = PromptBatcher(examples, batch_size=4, seed=5)
    got = [e.uid for size in (None, 3, 7, 1) for e in batcher.next_batch(size)]
    assert got == expected
    assert batcher.state_dict()["epoch"] == 1 and batcher.state_dict()["position"] == 4
    with pytest.raises(ValueError, match="positive"):
        batcher.next_batch(0)
