"""Per-step metrics: the JSON lines file and the console table."""

from __future__ import annotations

from typing import Any

# (column header, metric key, format)
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("step", "step", "{:>4d}"),
    ("reward", "reward/mean", "{:>6.3f}"),
    ("acc", "reward/accuracy", "{:>5.3f}"),
    ("resp_len", "response/length_mean", "{:>8.1f}"),
    ("kl", "actor/kl", "{:>8.5f}"),
    ("loss", "actor/loss", "{:>8.4f}"),
    ("gap_max", "logprob_gap/rollout_vs_learner_max", "{:>7.4f}"),
    ("t_roll", "timing/rollout", "{:>6.1f}"),
    ("t_ref", "timing/actor_ref_and_reward", "{:>6.1f}"),
    ("t_upd", "timing/update", "{:>6.1f}"),
    ("t_sync", "timing/sync", "{:>6.2f}"),
    ("t_step", "timing/step", "{:>6.1f}"),
    ("roll_tok/s", "throughput/rollout_tokens_per_s", "{:>10.0f}"),
    ("learn_tok/s", "throughput/learner_tokens_per_s", "{:>11.0f}"),
    ("mem_GiB", "memory/roles_peak_rss_gib", "{:>7.1f}"),
)


def table_header() -> str:
    return " ".join(_width(fmt, name).format(name) for name, _, fmt in TABLE_COLUMNS)


def table_row(metrics: dict[str, Any]) -> str:
    cells = []
    for name, key, fmt in TABLE_COLUMNS:
        value = metrics.get(key)
        cells.append(fmt.format(value) if value is not None else _width(fmt, name).format("-"))
    return " ".join(cells)


def _width(fmt: str, name: str) -> str:
    digits = "".join(ch for ch in fmt.split(":")[1] if ch.isdigit() or ch == ".").split(".")[0]
    return "{:>" + str(max(int(digits or 0), len(name))) + "}"


def merge_rank_metrics(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """One role's metrics from its ranks, which work at the same time on shares of the batch.

    ``throughput/*`` and ``memory/*`` add up (ranks run side by side); ``timing/*`` and ``*_max`` take
    the slowest/largest; ``rollout/new_tokens``-style counts add up; anything else is the mean.
    Example: ranks with 100 and 80 tokens/s in 2 s and 3 s give 180 tokens/s and 3 s.
    """
    if len(per_rank) == 1:
        return dict(per_rank[0])
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for m in per_rank for k in m):
        values = [m[key] for m in per_rank if key in m]
        if key.startswith(("throughput/", "memory/")) or key.endswith(("_count", "/new_tokens")):
            out[key] = float(sum(values))
        elif key.startswith("timing/") or key.endswith("_max"):
            out[key] = float(max(values))
        else:
            out[key] = float(sum(values) / len(values))
    return out
