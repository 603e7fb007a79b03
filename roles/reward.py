"""The reward TaskRunner: grades every response of a step (rule grading, a solver model, or a user function)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay.config import typed_section
from relay.config.schema import RewardConfig
from relay.data_proto import DataProto
from relay.faults import fault_point
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.process_identity import process_identity
from relay.run.logs import apply_role_log
from relay.scoring.blocklist import apply_blocklist, blocked_mask, check_blocklist
from relay.scoring.grade_settings import GradeSettings
from relay.scoring.overlong import apply_overlong_penalty
from relay.startup import start_up_with_collector_paused
from roles.env import apply_cpu_affinity, apply_torch_threads, memory_metrics


@dataclass(frozen=True)
class RewardSettings:
    """What the reward actor is built with: the ``reward`` section (typed), the grader of each task the run's rows
    can name (:meth:`relay.tasks.run_tasks.RunTasks.grading`: ``{"task", "graders", "options"}``), the solver
    model's path (``reward.mode=solver``), the seed and the longest response (the overlong penalty's)."""

    section: RewardConfig = field(default_factory=RewardConfig)
    grading: Mapping[str, Any] | None = None
    solver_path: str | None = None
    seed: int = 0
    max_response_length: int | None = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any], **kw: Any) -> RewardSettings:
        """From a ``reward`` mapping (missing keys take their defaults; a ``grading`` entry is the graders')."""
        values = dict(section)
        grading = values.pop("grading", None)
        return cls(typed_section(RewardConfig, values), grading, **kw)


class RewardWorker:
    """``mode=rule``: answer extraction + math-verify on a pool of grader processes.
    ``mode=solver``: a frozen solver model answers each question following the response (a guideline) in
    one engine call per step; its answers are graded as in rule mode and the reward is their mean correctness.
    ``mode=function``: a user function over the whole batch.
    With ``reward.overlong_buffer.enable`` a training batch's scores (not its acc) then lose DAPO's soft overlong
    penalty (``relay/scoring/overlong.py``, from ``response_length``; validation chunks, marked ``lenient``, are
    graded without it: validation reads ``acc``). In every mode a response containing a ``reward.blocklist``
    substring then gets score 0 and acc 0."""

    @start_up_with_collector_paused
    def __init__(self, settings: RewardSettings) -> None:
        apply_role_log()  # library output to outputs/<run>/logs/<actor>.log (relay.run.logs)
        apply_cpu_affinity()  # before the grader processes start: they inherit it
        self.cfg = cfg = settings.section
        self.grading = settings.grading or {"task": "gsm8k", "graders": {"gsm8k": "gsm8k"}}
        self.max_response_length = settings.max_response_length
        self.overlong = cfg.overlong_buffer if cfg.overlong_buffer.enable else None
        if self.overlong is not None and self.max_response_length is None:
            raise ValueError("reward.overlong_buffer.enable=true: the reward role needs data.max_response_length")
        self.blocklist = check_blocklist(list(cfg.blocklist))
        self.pool = None
        self.fn = None
        self.solver = None
        if cfg.mode == "function":
            from relay.scoring.user_function import load_reward_function

            self.fn = load_reward_function(cfg.function)
            return
        from relay.scoring.pool import GraderPool

        self.pool = GraderPool(cfg.workers)
        if cfg.mode == "solver":
            from roles.reward_solver import Solver

            apply_torch_threads(cfg.resources.threads)
            if settings.solver_path is None:
                raise ValueError("reward.mode=solver: the reward role needs the solver model's path")
            self.solver = Solver(settings.solver_path, cfg, settings.seed)

    def ready(self) -> dict:
        return {
            "role": "reward",
            "mode": self.cfg.mode,
            "workers": self.cfg.workers,
            **process_identity(),
        }

    def _graders(self, sources: Any | None, rows: int) -> list[str] | None:
        """Each row's grader: its task's (``data_source``, when the dataset mixes tasks), else the run's task's;
        None when that is GSM8K's for every row (the pool's default)."""
        graders, task = self.grading["graders"], self.grading["task"]
        if sources is None:
            return None if graders[task] == "gsm8k" else [graders[task]] * rows
        return [graders[task if source is None else source] for source in sources]

    def _grade(
        self,
        texts: list[str],
        ground_truths: list[str],
        metrics: dict,
        sources: Any | None = None,
        lenient: bool = False,
    ) -> list[dict[str, Any]]:
        """Rule grading on the pool, each row by its task's grader (``sources``: the rows' ``data_source``), with
        ``lenient`` each row's ``acc_lenient`` too; adds
        ``reward/format_rate``, ``reward/format_failure_rate``, ``reward/errors`` and ``reward/timeouts`` to
        ``metrics``."""
        results = self.pool.grade_batch(
            texts,
            ground_truths,
            timeout_s=self.cfg.timeout_s,
            item_timeout_s=self.cfg.item_timeout_s,
            graders=self._graders(sources, len(texts)),
            grader_options=self.grading.get("options"),
            lenient=lenient,
            settings=GradeSettings(
                format_score=self.cfg.format_score, use_last_number_fallback=self.cfg.use_last_number_fallback
            ),
        )
        format_rate = float(np.mean([r["formatted"] for r in results])) if results else 0.0
        metrics[om.REWARD_FORMAT_RATE] = format_rate
        metrics[om.REWARD_FORMAT_FAILURE_RATE] = 1.0 - format_rate
        metrics[om.REWARD_ERRORS] = float(sum("error" in r and r["error"] != "timeout" for r in results))
        metrics[om.REWARD_TIMEOUTS] = float(sum(r.get("error") == "timeout" for r in results))
        return results

    def score(self, data: DataProto, step: int = 0) -> DataProto:
        """Adds ``scores`` [B] and ``acc`` [B] (float32), in rule mode with ``data.meta_info["lenient"]`` (validation's
        rows) also ``acc_lenient`` [B] (:func:`relay.scoring.graders.lenient_acc`), and non-tensor
        ``extracted_answer`` [B] (rule and solver modes; in solver mode the answer of the solver's first sample) and
        ``solver_response`` [B] (solver mode: the solver's first sample). ``step`` seeds the solver's sampling.

        Metrics: ``reward/overlong_penalty_mean``, ``reward/overlong_frac``, ``reward/overlong_full_frac`` (with
        ``reward.overlong_buffer``); ``reward/blocked_count`` / ``reward/blocked_rate`` (responses zeroed by the
        blocklist); rule and solver modes also ``reward/format_rate``, ``reward/format_failure_rate``,
        ``reward/errors`` and ``reward/timeouts`` (answers that scored 0 because grading them overran
        ``reward.item_timeout_s``, or their chunk overran ``reward.timeout_s``); solver mode the solver's figures
        (``reward/solver_*``, ``throughput/solver_tokens_per_s``, ``timing/solver_generate``,
        ``timing/solver_grade``)."""
        fault_point("reward.score", step)
        start = time.perf_counter()
        metrics: dict[str, float] = {}
        non_tensor = {}
        responses = list(data.non_tensor["response_text"])
        lenient = bool(data.meta_info.get("lenient"))  # validation's rows
        if self.solver is not None:
            out, non_tensor = self._score_with_solver(data, step, metrics)
        elif self.pool is not None:
            sources = data.non_tensor.get("data_source")
            results = self._grade(responses, list(data.non_tensor["ground_truth"]), metrics, sources, lenient)
            out = {
                "scores": np.array([r["score"] for r in results], np.float32),
                "acc": np.array([r["acc"] for r in results], np.float32),
            }
            if lenient:
                out["acc_lenient"] = np.array([r["acc_lenient"] for r in results], np.float32)
            non_tensor["extracted_answer"] = np.array([r["extracted"] for r in results], dtype=object)
        else:
            from relay.scoring.user_function import call_reward_function

            out = call_reward_function(self.fn, data, dict(self.cfg.function_kwargs))
        if self.overlong is not None and "response_length" in data.batch and not lenient:
            out["scores"], overlong_metrics = apply_overlong_penalty(
                out["scores"],
                data.batch["response_length"],
                self.max_response_length,
                self.overlong.length,
                self.overlong.penalty_factor,
            )
            metrics.update(overlong_metrics)
        out["scores"], out["acc"], blocked = apply_blocklist(out["scores"], out["acc"], responses, self.blocklist)
        if "acc_lenient" in out:  # a blocked response is wrong in every reading
            out["acc_lenient"] = np.where(blocked_mask(responses, self.blocklist), 0.0, out["acc_lenient"])
        metrics.update(blocked)
        seconds = time.perf_counter() - start
        metrics[sm.TIMING_ROLE_COMPUTE.format(role="reward")] = seconds
        metrics.update(memory_metrics("reward"))  # the actor; grader processes not included
        metrics[sm.THROUGHPUT_REWARD] = len(data) / max(seconds, 1e-9)
        return DataProto.from_dict(batch=out, non_tensor=non_tensor, meta_info={"metrics": metrics})

    def _score_with_solver(self, data: DataProto, step: int, metrics: dict) -> tuple[dict, dict]:
        from relay.scoring.solver_prompt import mean_correctness

        n = self.cfg.solver_n
        texts, solver_metrics = self.solver.answer(
            list(data.non_tensor["question"]), list(data.non_tensor["response_text"]), step
        )
        metrics.update(solver_metrics)
        graded_at = time.perf_counter()
        ground_truths = [gt for gt in data.non_tensor["ground_truth"] for _ in range(n)]
        results = self._grade(texts, ground_truths, metrics)
        metrics[sm.TIMING_SOLVER_GRADE] = time.perf_counter() - graded_at
        correct = np.array([r["acc"] for r in results], np.float32)
        metrics[om.REWARD_SOLVER_ACCURACY] = float(correct.mean()) if len(correct) else 0.0
        reward = mean_correctness(correct, n)
        first = slice(0, len(texts), n)
        non_tensor = {
            "solver_response": np.array(texts[first], dtype=object),
            "extracted_answer": np.array([r["extracted"] for r in results[first]], dtype=object),
        }
        return {"scores": reward, "acc": reward.copy()}, non_tensor

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
