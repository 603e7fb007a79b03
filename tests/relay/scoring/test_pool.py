"""Tests for GraderPool: parallel grading, per-item errors, hard timeouts and recovery."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from relay.data import load_gsm8k
from relay.repo import REPO_ROOT
from relay.scoring.grade_settings import GradeSettings
from relay.scoring.grader import grade
from relay.scoring.graders import grade_item, lenient_acc
from relay.scoring.pool import GraderPool

# Training's settings in the presets: a formatted but wrong answer scores 0.1.
WITH_FORMAT_SCORE = GradeSettings(format_score=0.1)

# Parses instantly but sympy would need a 370-million-digit power to compare it: a real slow path.
SLOW = "#### 9^{9^{9}}"


@pytest.fixture(scope="module")
def pool() -> Iterator[GraderPool]:
    with GraderPool(workers=2) as grader_pool:
        yield grader_pool


def test_gsm8k_gold_solutions_all_correct(pool: GraderPool) -> None:
    path = REPO_ROOT / "data/gsm8k/test.jsonl"
    with path.open(encoding="utf-8") as f:
        solutions = [json.loads(line)["answer"] for line in f]
    ground_truths = [example.ground_truth for example in load_gsm8k(path)]
    assert len(solutions) == 1319
    results = pool.grade_batch(solutions, ground_truths)
    failures = [(gt, r) for gt, r in zip(ground_truths, results, strict=True) if r["score"] != 1.0]
    assert not failures, failures[:5]


def without_lenient(result: dict) -> dict:
    """A pool result as its grader returns it (the pool adds ``acc_lenient``)."""
    return {key: value for key, value in result.items() if key != "acc_lenient"}


def test_matches_in_process_grading_in_order(pool: GraderPool) -> None:
    responses = ["#### 18", "\\boxed{0.5}", "The answer is 7.", "#### 3", "nothing", "#### 1,000"] * 3
    truths = ["18", "1/2", "8", "3", "4", "1000"] * 3
    expected = [grade(r, t, WITH_FORMAT_SCORE) for r, t in zip(responses, truths, strict=True)]
    lenient = [lenient_acc("gsm8k", r, t, e["acc"]) for r, t, e in zip(responses, truths, expected, strict=True)]
    # training's grading: strict only
    assert pool.grade_batch(responses, truths, settings=WITH_FORMAT_SCORE) == expected
    results = pool.grade_batch(responses, truths, settings=WITH_FORMAT_SCORE, lenient=True)
    assert [without_lenient(r) for r in results] == expected
    assert [r["acc_lenient"] for r in results] == lenient == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0] * 3


def test_item_error_is_isolated(pool: GraderPool) -> None:
    results = pool.grade_batch(["#### 1", "#### 2", "#### 3"], ["1", "", "3"])
    assert [r["score"] for r in results] == [1.0, 0.0, 1.0]
    assert results[1]["error"].startswith("ValueError: ")
    assert "error" not in results[0] and "error" not in results[2]


def test_timeout_terminates_and_recovers(pool: GraderPool) -> None:
    old_processes = list(pool._executor._processes.values())
    start = time.perf_counter()
    results = pool.grade_batch([SLOW, "#### 2", "#### 3"], ["72", "2", "3"], timeout_s=0.5)
    elapsed = time.perf_counter() - start
    # chunks are [SLOW, "#### 2"] and ["#### 3"]: the stuck chunk times out as a whole
    assert [r.get("error") for r in results] == ["timeout", "timeout", None]
    assert [r["score"] for r in results] == [0.0, 0.0, 1.0]
    assert elapsed < 15  # 0.5 s timeout + tear-down + spawning fresh workers
    assert not any(process.is_alive() for process in old_processes)
    again = pool.grade_batch(["#### 2", "#### 5"], ["2", "4"], timeout_s=5.0)
    assert [r["score"] for r in again] == [1.0, 0.0]


def test_math_verify_alarm_fires_inside_workers(pool: GraderPool) -> None:
    results = pool.grade_batch([SLOW, "#### 2"], ["72", "2"], timeout_s=30.0)
    assert [r["score"] for r in results] == [0.0, 1.0]
    assert "error" not in results[0]  # math-verify gave up on its own; the pool did not time out


def test_a_hanging_item_costs_its_own_timeout_only(pool: GraderPool) -> None:
    old_processes = list(pool._executor._processes.values())
    start = time.perf_counter()
    # one chunk per worker: [SLOW, "#### 2"] and ["#### 3"]; the item timer stops SLOW after 1 s
    results = pool.grade_batch([SLOW, "#### 2", "#### 3"], ["72", "2", "3"], timeout_s=30.0, item_timeout_s=1.0)
    elapsed = time.perf_counter() - start
    assert [r.get("error") for r in results] == ["timeout", None, None]
    assert [r["score"] for r in results] == [0.0, 1.0, 1.0]  # its chunk-mate keeps its score
    assert elapsed < 5  # ~1 s for the hanging item, not the 30 s backstop
    assert list(pool._executor._processes.values()) == old_processes  # no tear-down was needed


def test_empty_and_mismatched(pool: GraderPool) -> None:
    assert pool.grade_batch([], []) == []
    with pytest.raises(ValueError, match="2 responses but 1 ground truths"):
        pool.grade_batch(["a", "b"], ["1"])


def test_in_process_pool_main_thread_and_other_thread() -> None:
    pool = GraderPool(workers=0)
    assert [r["score"] for r in pool.grade_batch(["#### 4", "#### 5"], ["4", "4"])] == [1.0, 0.0]
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.extend(pool.grade_batch(["#### 1/2"], ["0.5"])))
    thread.start()
    thread.join()
    assert results[0]["score"] == 1.0  # math-verify's alarm is switched off off the main thread
    pool.close()


def test_closed_pool_rejects_batches() -> None:
    pool = GraderPool(workers=1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.grade_batch(["#### 1"], ["1"])
    with pytest.raises(ValueError, match="workers"):
        GraderPool(workers=-1)


# One item per grader, in a batch that mixes sources; gsm8k items are graded exactly as without ``graders``.
MIXED = [
    ("gsm8k", "#### 1,000", "1000"),
    ("math", "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}"),
    ("exact", "The answer is Paris.", "PARIS"),
    ("regex", "Choice: (b) ... Choice: C", "c"),
    ("math", "\\boxed{(1, 2]}", "[1,2)"),
    ("gsm8k", "#### 17", "18"),
    ("exact", "no answer", "paris"),
]
MIXED_OPTIONS = {"regex": {"pattern": r"Choice:\s*\(?([A-E])"}, "exact": {"case_sensitive": False}}
# Catastrophic backtracking: (a+)+$ against a run of a's that ends in b tries ~2**40 splits.
BACKTRACKING = {"pattern": r"(a+)+$"}


def test_mixed_graders_in_one_batch(pool: GraderPool) -> None:
    graders, responses, truths = (list(column) for column in zip(*MIXED, strict=True))
    expected = [
        grade_item(g, r, t, MIXED_OPTIONS.get(g), settings=WITH_FORMAT_SCORE)
        for g, r, t in zip(graders, responses, truths, strict=True)
    ]
    assert [r["score"] for r in expected] == [1.0, 1.0, 1.0, 1.0, 0.1, 0.1, 0.0]
    options = {"grader_options": MIXED_OPTIONS, "settings": WITH_FORMAT_SCORE, "lenient": True}
    results = pool.grade_batch(responses, truths, graders=graders, **options)
    assert [without_lenient(r) for r in results] == expected
    in_process = GraderPool(workers=0).grade_batch(responses, truths, graders=graders, **options)
    assert in_process == results
    # naming gsm8k for every item is the default path
    gsm8k_only = pool.grade_batch(responses, truths, graders=["gsm8k"] * len(responses), settings=WITH_FORMAT_SCORE)
    assert gsm8k_only == pool.grade_batch(responses, truths, settings=WITH_FORMAT_SCORE)


def test_pathological_items_of_any_grader_cost_their_own_timeout_only(pool: GraderPool) -> None:
    old_processes = list(pool._executor._processes.values())
    # chunks: [slow math, gsm8k] and [backtracking regex, exact]; the item timer stops each slow item after 1 s
    graders = ["math", "gsm8k", "regex", "exact"]
    responses = ["\\boxed{9^{9^{9}}}", "#### 2", "a" * 40 + "b", "#### Rome"]
    options = {"regex": BACKTRACKING}
    start = time.perf_counter()
    results = pool.grade_batch(
        responses, ["72", "2", "b", "rome"], graders=graders, grader_options=options, timeout_s=30.0, item_timeout_s=1.0
    )
    elapsed = time.perf_counter() - start
    assert [r.get("error") for r in results] == ["timeout", None, "timeout", None]
    assert [r["score"] for r in results] == [0.0, 1.0, 0.0, 1.0]
    assert elapsed < 5  # the chunks run side by side: ~1 s, not the 30 s backstop
    assert list(pool._executor._processes.values()) == old_processes  # no tear-down was needed


def test_grader_errors_are_isolated_and_bad_graders_rejected(pool: GraderPool) -> None:
    results = pool.grade_batch(
        ["\\boxed{1}", "\\boxed{2}", "#### 3"], ["1", "", "3"], graders=["math", "math", "gsm8k"]
    )
    assert [r["score"] for r in results] == [1.0, 0.0, 1.0]
    assert results[1]["error"].startswith("ValueError: math-verify could not parse the ground truth")
    assert "error" not in results[0] and "error" not in results[2]
    with pytest.raises(ValueError, match="2 responses but 1 graders"):
        pool.grade_batch(["a", "b"], ["1", "2"], graders=["gsm8k"])
    with pytest.raises(ValueError, match=r"^graders='nope': unknown; choose one of \['countdown', "):
        pool.grade_batch(["a"], ["1"], graders=["nope"])
    with pytest.raises(ValueError, match=r"^grader_options\['regex'\]\.pattern: the 'regex' grader needs it"):
        pool.grade_batch(["a"], ["1"], graders=["regex"], grader_options={"exact": {"pattern": "x"}})
    with pytest.raises(ValueError, match=r"grader_options\['regex'\]\.pattern='\(': does not compile"):
        GraderPool(workers=0).grade_batch(["a"], ["1"], graders=["regex"], grader_options={"regex": {"pattern": "("}})


def test_a_user_grader_runs_in_the_workers_under_the_item_timer(pool: GraderPool) -> None:
    """``reward.grader: package.module:callable`` is imported by each spawned worker and timed per item like the
    shipped graders: a response it hangs on scores 0 as a timeout, its chunk-mates keep their scores."""
    spec = "tests.relay.scoring.reward_fns:hangs"
    results = pool.grade_batch(
        ["fine", "hang here", "fine too", "ok"], ["1"] * 4, graders=[spec] * 4, timeout_s=30.0, item_timeout_s=0.5
    )
    assert [r["score"] for r in results] == [1.0, 0.0, 1.0, 1.0]
    assert results[1]["error"] == "timeout" and "error" not in results[0]
