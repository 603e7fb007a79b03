"""Smoke test of the benchmark entry point: ``python -m benchmarks.speed.run --quick --repeats 1`` on the tiny model,
every question, so the scripts don't rot. Nothing about time is asserted (benchmarks are not tests)."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.speed import report
from benchmarks.speed.run import QUESTIONS, main


@pytest.mark.slow  # ~4 min: a whole `benchmarks.speed.run --quick`; run it with `pytest -m slow` after touching it
def test_quick_run_answers_every_question(ray_session, tmp_path) -> None:
    out = tmp_path / "run.json"
    assert main(["--quick", "--repeats", "1", "--no-markdown", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    q = result["questions"]
    assert set(q) == set(QUESTIONS) and result["mode"] == "quick" and result["model"] == "tiny"
    ratios = [
        q["step_vs_trl"]["relay_over_trl"],
        q["step_vs_trl"]["memory_relay_over_trl"],
        q["rollout"]["vllm_over_hf"],
        q["rollout"]["relay_vllm_over_direct"],
        q["learner"]["jax_vs_torch_speedup"],
        q["overheads"]["sync_over_plain_copy"],
        q["scaling"]["two_replicas_over_one"],
        q["reward"]["speedup"],
    ]
    assert all(math.isfinite(r) and r > 0 for r in ratios), ratios
    assert len(q["step_vs_trl"]["relay"]["steps"]) == 1 and len(q["step_vs_trl"]["trl"]["seconds_per_step"]) == 2
    assert set(q["scaling"]["grid"]) == {"4x4", "16x8"}
    assert 0 <= q["overheads"]["driver_and_ray_share"]["median"] < 1

    blocks = report.sections(result)
    assert list(blocks) == [key for key, _ in report.SECTIONS]
    for key, title in report.SECTIONS:
        assert blocks[key].startswith(f"#### {title}\n") and "repeats" in blocks[key]
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nintro\n")
    report.update_benchmarks_md(md, "quick", blocks)
    report.update_benchmarks_md(md, "quick", {"reward": "#### Reward grading\n\nnew\n"})  # an --only run
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nintro\n")
    assert all(text.count(f"<!-- bench:quick:{key} -->") == 1 for key in blocks)
    assert "#### Reward grading\n\nnew\n" in text and blocks["learner"] in text
