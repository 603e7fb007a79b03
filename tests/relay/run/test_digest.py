"""The digest of what a run computed: equal for runs that computed the same, naming the first difference."""

from __future__ import annotations

import json
from pathlib import Path

from relay.run.digest import computed_metrics, digest, main


def _run(path: Path, rows: list[dict]) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_wall_times_memory_and_rates_do_not_count(tmp_path, capsys) -> None:
    a = _run(tmp_path / "a", [{"step": 0, "reward/mean": 0.25, "timing/step": 41.2, "memory/learner_peak_rss_gib": 3}])
    b = _run(tmp_path / "b", [{"step": 0, "timing/step": 39.0, "reward/mean": 0.25, "sync/export_seconds": 0.4}])
    assert computed_metrics(a) == computed_metrics(b) == [{"reward/mean": 0.25, "step": 0}]
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[0] == out[1].split()[0] == digest([{"reward/mean": 0.25, "step": 0}])


def test_one_bit_of_difference_is_found_and_named(tmp_path, capsys) -> None:
    a = _run(tmp_path / "a", [{"step": 0, "actor/loss": 0.1}, {"step": 1, "actor/loss": 0.2}])
    b = _run(tmp_path / "b", [{"step": 0, "actor/loss": 0.1}, {"step": 1, "actor/loss": 0.20000000000000004}])
    assert main([str(a), str(b)]) == 1
    assert "step 1 actor/loss: 0.2 != 0.20000000000000004" in capsys.readouterr().err
