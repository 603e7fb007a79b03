"""benchmarks.learning.race_records: a run recorded in one clone is read back in another as the same run, with its
responses where the race's paired tests read them; runs of different races never share a folder."""

from __future__ import annotations

import doctest
import gzip
import json
from pathlib import Path

import pytest

from benchmarks.learning import race_records
from benchmarks.learning.curve import CurvePoint
from benchmarks.learning.paired import outcomes
from benchmarks.learning.race import ArmSeed
from benchmarks.learning.race_records import load_base, load_run, race_key, save_base, save_run
from benchmarks.learning.relay_vs_trl import responses_file


def test_the_module_examples_hold() -> None:
    result = doctest.testmod(race_records)
    assert result.attempted >= 1 and result.failed == 0


def _evaluation(out: Path, name: str, correct: list[bool]) -> None:
    lines = [
        {
            "uid": f"rg-{i}",
            "sample": 0,
            "question": f"Calculate {i} + 1.",
            "ground_truth": json.dumps({"answer": str(i + 1), "dataset": "basic_arithmetic", "metadata": {}}),
            "response": f"\\boxed{{{i + 1 if ok else 0}}}",
            "correct": ok,
            "correct_lenient": ok,
            "finished": True,
            "response_tokens": 5,
        }
        for i, ok in enumerate(correct)
    ]
    responses_file(out, name).write_text("".join(json.dumps(r) + "\n" for r in lines))


def _point(step: int, minutes: float, strict: float) -> CurvePoint:
    return CurvePoint(step, minutes, strict, (0.1, 0.9), strict, (0.1, 0.9), 1.0, 3)


def test_a_recorded_run_reads_back_as_the_same_run_in_a_fresh_clone(tmp_path: Path) -> None:
    trained, fresh, folder = tmp_path / "trained", tmp_path / "fresh", tmp_path / "records"
    trained.mkdir(), fresh.mkdir(), folder.mkdir()
    _evaluation(trained, "eval_base", [True, False, False])
    _evaluation(trained, "eval_relay_seed2_step8", [True, True, False])
    base = _point(0, 0.0, 1 / 3)
    run = ArmSeed("relay", 2, [base, _point(8, 4.5, 2 / 3)], {8: "eval_relay_seed2_step8"})
    save_base(base, trained, folder, {"commit": "abc1234"})
    path = save_run(run, trained, folder, {"commit": "abc1234"})
    assert path == folder / "relay_seed2.json"
    assert json.loads(path.read_text())["meta"] == {"commit": "abc1234"}

    assert load_base(folder, fresh) == base
    assert ArmSeed(**load_run(folder, "relay", 2, fresh)) == run
    restored = responses_file(fresh, "eval_relay_seed2_step8")
    assert outcomes(restored) == outcomes(responses_file(trained, "eval_relay_seed2_step8"))
    kept = json.loads(restored.read_text().splitlines()[1])
    assert kept["answer"] == "2" and "ground_truth" not in kept and kept["response"] == "\\boxed{2}"
    assert load_run(folder, "relay", 3, fresh) is None and load_run(folder, "trl", 2, fresh) is None


def test_the_same_answers_give_the_same_bytes_and_a_lost_response_file_is_named(tmp_path: Path) -> None:
    out, folder = tmp_path / "out", tmp_path / "records"
    out.mkdir(), folder.mkdir()
    _evaluation(out, "eval_trl_seed1_step3", [False, True])
    run = ArmSeed("trl", 1, [_point(0, 0.0, 0.5), _point(3, 3.0, 0.5)], {3: "eval_trl_seed1_step3"})
    save_run(run, out, folder, {})
    gz = folder / "responses" / "eval_trl_seed1_step3.jsonl.gz"
    first = gz.read_bytes()
    save_run(run, out, folder, {})
    assert gz.read_bytes() == first and len(gzip.decompress(first).splitlines()) == 2
    gz.unlink()
    with pytest.raises(SystemExit, match="eval_trl_seed1_step3.jsonl.gz: missing.*delete the record"):
        load_run(folder, "trl", 1, out)


def test_an_arm_that_did_not_run_is_recorded_with_its_error(tmp_path: Path) -> None:
    error = "trl_vllm_seed1 failed (exit 1) after 2.0 min; 'Parameter' object has no attribute 'weight_loader'"
    failed = ArmSeed("trl_vllm", 1, error=error)
    save_run(failed, tmp_path, tmp_path, {})
    assert ArmSeed(**load_run(tmp_path, "trl_vllm", 1, tmp_path)) == failed


def test_races_of_different_budgets_splits_or_sizes_never_share_records() -> None:
    keys = {race_key("arithmetic_smollm2", dev, m, n) for dev in (False, True) for m in (15.0, 30.0) for n in (50, 200)}
    assert len(keys) == 8
