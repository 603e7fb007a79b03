"""The over-long prompt policy: filter, truncate left/right, or refuse (by tokens and by characters)."""

import json
from pathlib import Path
from typing import Any

import pytest

from relay.data import DatasetError, Example
from relay.tasks.prompt_source import PromptSource, cap_questions, fit_prompt, fit_question
from tests.relay.data.char_prompts import CharTokenizer, data_config


def test_short_prompt_is_kept_whole() -> None:
    assert fit_prompt([1, 2, 3], 3, filter_overlong=True, truncation="error") == [1, 2, 3]


def test_filter_drops_and_truncation_cuts() -> None:
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=True, truncation="error") is None
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="left") == [2, 3, 4]
    assert fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="right") == [1, 2, 3]


def test_error_names_the_keys() -> None:
    with pytest.raises(DatasetError, match=r"4 tokens > data.max_prompt_length=3 and data.truncation=error"):
        fit_prompt([1, 2, 3, 4], 3, filter_overlong=False, truncation="error")


# -- the character cap (data.max_prompt_chars) -------------------------------------------------------------


def test_fit_question_golden() -> None:
    assert fit_question("abc", 5, filter_overlong=True, truncation="error") == "abc"
    assert fit_question("abcde", 5, filter_overlong=True, truncation="error") == "abcde"  # at the cap: kept
    assert fit_question("abcdefg", 5, filter_overlong=True, truncation="error") is None
    assert fit_question("abcdefg", 5, filter_overlong=False, truncation="left") == "cdefg"
    assert fit_question("abcdefg", 5, filter_overlong=False, truncation="right") == "abcde"
    assert fit_question("abcdefg", 0, filter_overlong=False, truncation="error") == "abcdefg"  # 0: no cap


def test_fit_question_error_names_key_example_and_fix() -> None:
    with pytest.raises(
        DatasetError,
        match=r"example train-7: its question has 7 characters > data.max_prompt_chars=5 and data.truncation=error; "
        r"raise data.max_prompt_chars \(0: no cap\), set data.filter_overlong_prompts=true, or data.truncation=",
    ):
        fit_question("abcdefg", 5, filter_overlong=False, truncation="error", uid="train-7")


def test_cap_questions_counts_and_keeps_order() -> None:
    examples = [Example(f"x-{i}", q, str(i)) for i, q in enumerate(["short", "a long question", "tiny"])]
    kept, dropped, truncated = cap_questions(examples, 6, filter_overlong=True, truncation="error")
    assert ([e.uid for e in kept], dropped, truncated) == (["x-0", "x-2"], 1, 0)
    kept, dropped, truncated = cap_questions(examples, 6, filter_overlong=False, truncation="left")
    assert ([e.question for e in kept], dropped, truncated) == (["short", "estion", "tiny"], 0, 1)
    assert kept[1].uid == "x-1" and kept[1].ground_truth == "1" and examples[1].question == "a long question"
    assert cap_questions(examples, 0, filter_overlong=True, truncation="error") == (examples, 0, 0)


def _source(tmp_path: Path, questions: list[str], **data: Any) -> PromptSource:
    path = tmp_path / "mini.jsonl"
    lines = [json.dumps({"question": q, "answer": f"#### {i}"}) for i, q in enumerate(questions)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return PromptSource.from_config(data_config(train_path=str(path), **data), CharTokenizer(), batch_size=1)


QUESTIONS = ["What is 1+1?", "x" * 50 + " What is 2+2?", "What is 3+3?"]


def test_char_cap_filters_at_load_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _source(tmp_path, QUESTIONS, max_prompt_chars=20)
    assert [e.uid for e in source.examples] == ["mini-1", "mini-3"]
    assert (source.dropped_too_many_chars, source.truncated_chars, source.dropped_too_long) == (1, 0, 0)
    assert "data: 1 of 3 prompts dropped and 0 truncated for being longer than data.max_prompt_chars=20 characters" in (
        capsys.readouterr().err
    )


def test_char_cap_truncates_what_the_model_sees(tmp_path: Path) -> None:
    source = _source(tmp_path, QUESTIONS, max_prompt_chars=20, filter_overlong_prompts=False, truncation="left")
    assert (source.dropped_too_many_chars, source.truncated_chars) == (0, 1)
    assert source.examples[1].question == "xxxxxxx What is 2+2?"
    prompt = "".join(map(chr, source.prompt_ids["mini-2"]))
    assert "xxxxxxx What is 2+2?" in prompt and "x" * 8 not in prompt
    batch = source.next_batch()
    assert batch.non_tensor["question"][0] in {e.question for e in source.examples}


def test_char_cap_error_and_all_dropped(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"example mini-2: its question has 63 characters > data.max_prompt_chars"):
        _source(tmp_path, QUESTIONS, max_prompt_chars=20, filter_overlong_prompts=False)
    with pytest.raises(DatasetError, match=r"data.max_prompt_chars=5: every question in .* is longer"):
        _source(tmp_path, QUESTIONS, max_prompt_chars=5)


def test_no_char_cap_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _source(tmp_path, QUESTIONS)
    assert len(source.examples) == 3 and (source.dropped_too_many_chars, source.truncated_chars) == (0, 0)
    assert "max_prompt_chars" not in capsys.readouterr().err


def test_extra_pass_uids_never_collide_with_the_first_pass(tmp_path: Path) -> None:
    source = _source(tmp_path, QUESTIONS)
    first = source.next_batch(size=2)
    extra = source.next_batch(size=2, sample_pass=1)
    assert [u.split("/")[1] for u in first.non_tensor["uid"]] == ["0", "1"]
    assert [u.split("/")[1] for u in extra.non_tensor["uid"]] == ["p1.0", "p1.1"]
    assert not set(first.non_tensor["uid"]) & set(extra.non_tensor["uid"])
