"""benchmarks.learning.lora: two learning runs' OUT directories, full fine-tuning and LoRA, in one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning.lora import summarize, table
from tests.benchmarks.learning.test_relay_vs_trl import _metrics


def _learning_out(out: Path, accuracy: float, rewards: list[float], sync_bytes: float) -> Path:
    """A benchmarks.learning.relay_vs_trl OUT directory: the evaluations and a run's metric rows."""
    (out / "relay").mkdir(parents=True)
    (out / "eval_base.json").write_text(json.dumps(_metrics(0.0, 0.25)))
    (out / "eval_relay.json").write_text(json.dumps(_metrics(accuracy, 0.9)))
    rows = [
        {
            "time/elapsed_s": 60.0 * (i + 1),
            "reward/mean": r,
            "actor/kl": 0.1,
            "timing/step": 30.0,
            "sync/bytes": sync_bytes,
            "memory/learner_peak_rss_gib": 2.0,
        }
        for i, r in enumerate(rewards)
    ]
    (out / "relay" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_lora_learning_compares_the_two_runs(tmp_path: Path) -> None:
    full = _learning_out(tmp_path / "full", 0.025, [0.0] * 10 + [0.5] * 10, 5.4e8)
    lora = _learning_out(tmp_path / "lora", 0.01, [0.1] * 15, 1.9e7)
    arms = {"full fine-tuning": summarize(full)[0], "LoRA rank 16": summarize(lora)[0]}
    assert arms["full fine-tuning"]["summary"]["reward_last10"] == pytest.approx(0.5)
    assert arms["LoRA rank 16"]["summary"]["steps"] == 15
    text = table(arms)
    assert "| base | 0 |" in text and "| LoRA rank 16 | 15 | 30.0 | 0.100 → 0.100 |" in text
    assert "| 540 | 2.00 |" in text and "| 19 | 2.00 |" in text
