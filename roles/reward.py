"""The reward TaskRunner: grades every response of a step (rule grading or a user function)."""

from __future__ import annotations

import os
import time

import numpy as np

from relay.data_proto import DataProto
from relay.scoring.blocklist import apply_blocklist, check_blocklist
from roles.env import peak_rss_gib


class RewardWorker:
    """``mode=rule``: GSM8K answer extraction + math-verify on a pool of grader processes;
    ``mode=function``: a user function over the whole batch. In both modes a response containing a
    ``reward.blocklist`` substring then gets score 0 and acc 0."""

    def __init__(self, reward_cfg: dict) -> None:
        self.cfg = reward_cfg
        self.blocklist = check_blocklist(reward_cfg["blocklist"])
        self.pool = None
        self.fn = None
        if reward_cfg["mode"] == "rule":
            from relay.scoring.pool import GraderPool

            self.pool = GraderPool(reward_cfg["workers"])
        else:
            from relay.scoring.user_function import load_reward_function

            self.fn = load_reward_function(reward_cfg["function"])

    def ready(self) -> dict:
        return {"role": "reward", "mode": self.cfg["mode"], "workers": self.cfg["workers"], "pid": os.getpid()}

    def score(self, data: DataProto) -> DataProto:
        """Adds ``scores`` [B] and ``acc`` [B] (float32), and non-tensor ``extracted_answer`` (rule mode).

        Metrics: ``reward/blocked_count`` / ``reward/blocked_rate`` (responses zeroed by the blocklist); rule
        mode also ``reward/format_rate``, ``reward/errors`` and ``reward/timeouts`` (responses that scored 0
        because grading them overran ``reward.item_timeout_s``, or their chunk overran ``reward.timeout_s``)."""
        start = time.perf_counter()
        metrics: dict[str, float] = {}
        non_tensor = {}
        if self.pool is not None:
            results = self.pool.grade_batch(
                list(data.non_tensor["response_text"]),
                list(data.non_tensor["ground_truth"]),
                timeout_s=self.cfg["timeout_s"],
                item_timeout_s=self.cfg["item_timeout_s"],
                use_last_number_fallback=self.cfg["use_last_number_fallback"],
                format_score=self.cfg["format_score"],
            )
            out = {
                "scores": np.array([r["score"] for r in results], np.float32),
                "acc": np.array([r["acc"] for r in results], np.float32),
            }
            non_tensor["extracted_answer"] = np.array([r["extracted"] for r in results], dtype=object)
            metrics["reward/format_rate"] = float(np.mean([r["formatted"] for r in results]))
            metrics["reward/errors"] = float(sum("error" in r and r["error"] != "timeout" for r in results))
            metrics["reward/timeouts"] = float(sum(r.get("error") == "timeout" for r in results))
        else:
            from relay.scoring.user_function import call_reward_function

            out = call_reward_function(self.fn, data, dict(self.cfg["function_kwargs"]))
        out["scores"], out["acc"], blocked = apply_blocklist(
            out["scores"], out["acc"], list(data.non_tensor["response_text"]), self.blocklist
        )
        metrics.update(blocked)
        seconds = time.perf_counter() - start
        metrics["timing/reward_compute"] = seconds
        metrics["memory/reward_peak_rss_gib"] = peak_rss_gib()  # the actor; grader processes not included
        metrics["throughput/reward_items_per_s"] = len(data) / max(seconds, 1e-9)
        return DataProto.from_dict(batch=out, non_tensor=non_tensor, meta_info={"metrics": metrics})

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
