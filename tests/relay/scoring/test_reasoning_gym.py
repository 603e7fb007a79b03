"""relay.scoring.reasoning_gym: each dataset's verifier behind Relay's grader: binary by default, partial credit as
an option, the item's metadata carried in the ground truth, and the lenient last-number reading."""

from __future__ import annotations

import pytest

from relay.scoring.grade_settings import GradeSettings
from relay.scoring.graders import grade_item, lenient_acc
from relay.scoring.reasoning_gym import answer_of, decode_ground_truth, encode_ground_truth, grade_reasoning_gym

pytest.importorskip("reasoning_gym")

EIGHT = encode_ground_truth({"answer": "8", "metadata": {"source_dataset": "basic_arithmetic", "expression": "5 + 3"}})


@pytest.mark.parametrize(
    ("response", "score", "acc", "extracted"),
    [
        ("5 + 3 = \\boxed{8}", 1.0, 1.0, "8"),
        ("\\boxed{9}", 0.1, 0.0, "9"),  # formatted, wrong: the format score
        ("\\boxed{x 8}", 0.1, 0.0, "x 8"),  # the verifier's partial credit (1/3) is not a right answer
        ("it is 8", 0.0, 0.0, None),  # no answer where the prompt asked
        # the prompt's placeholder copied: no answer, no format score (a seed of the arithmetic preset settled here)
        ("5 + 3 = \\boxed{<answer>}.", 0.0, 0.0, None),
    ],
)
def test_binary_grading_golden(response: str, score: float, acc: float, extracted: str | None) -> None:
    result = grade_reasoning_gym(response, EIGHT, GradeSettings(format_score=0.1))
    assert (result["score"], result["acc"], result["extracted"]) == (score, acc, extracted)


def test_partial_credit_is_an_option() -> None:
    """reasoning-gym's default verifier scores a padded answer ``len(answer) / len(response)``."""
    result = grade_item("reasoning_gym", "\\boxed{x 8}", EIGHT, {"partial_credit": True})
    assert result["score"] == pytest.approx(1 / 3) and result["acc"] == 0.0


def test_the_lenient_reading_is_the_verifiers_on_the_last_number() -> None:
    assert lenient_acc("reasoning_gym", "5 + 3 makes 8", EIGHT, 0.0) == 1.0
    assert lenient_acc("reasoning_gym", "5 + 3 makes 9", EIGHT, 0.0) == 0.0


def test_a_verifier_that_reads_metadata_gets_it() -> None:
    """reasoning-gym's countdown checks the numbers used from the item's metadata, not only its answer."""
    import reasoning_gym

    item = reasoning_gym.create_dataset("countdown", seed=3, size=1)[0]
    truth = encode_ground_truth(item)
    assert decode_ground_truth(truth)["dataset"] == "countdown"
    assert grade_reasoning_gym(f"\\boxed{{{item['answer']}}}", truth)["acc"] == 1.0
    assert grade_reasoning_gym("\\boxed{1 + 1}", truth)["acc"] == 0.0


def test_answer_of_and_bad_ground_truths() -> None:
    assert answer_of(EIGHT) == "8"
    with pytest.raises(ValueError, match="invalid JSON"):
        decode_ground_truth("{eight")
    with pytest.raises(ValueError, match="needs a JSON object with 'dataset' and 'answer'"):
        decode_ground_truth('{"answer": "8"}')
