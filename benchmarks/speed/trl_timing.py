"""Timing TRL's ``GRPOTrainer`` from the outside: a step's wall time (a ``TrainerCallback``), the time of the
trainer methods that generate and score (wrapped on the instance), and checks that every trainer step was one
generation round and one optimizer step. Written against trl==1.16.0's method names
(:mod:`benchmarks.speed.trl_grpo` says what each phase holds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

PHASES = ("generate_and_score", "generate", "reward")  # timed TRL methods, see wrap_phases


class StepTimer:
    """Per-step wall time (a TrainerCallback, built lazily) plus time spent in wrapped trainer methods."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.phases: list[dict[str, float]] = []
        self.calls: list[dict[str, int]] = []  # per step: calls of each wrapped method and optimizer steps
        self._start: float | None = None
        self._phase: dict[str, float] = {}
        self._calls: dict[str, int] = {}

    def begin(self) -> None:
        self._phase = dict.fromkeys(PHASES, 0.0)
        self._calls = dict.fromkeys((*PHASES, "optimizer"), 0)
        self._start = time.perf_counter()

    def end(self) -> None:
        if self._start is None:
            raise RuntimeError("on_step_end without on_step_begin")
        self.seconds.append(time.perf_counter() - self._start)
        self.phases.append(self._phase)
        self.calls.append(self._calls)
        self._start = None

    def count(self, name: str) -> None:
        self._calls[name] = self._calls.get(name, 0) + 1

    def timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` wrapped so its wall time adds to phase ``name`` of the current step."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._phase[name] = self._phase.get(name, 0.0) + time.perf_counter() - start
                self.count(name)

        return wrapper

    def callback(self) -> Any:
        from transformers import TrainerCallback

        timer = self

        class _Callback(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                timer.begin()

            def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                timer.count("optimizer")

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                timer.end()

        return _Callback()


def wrap_phases(trainer: Any, timer: StepTimer) -> None:
    """Time TRL 1.16's generation+scoring method and, inside it, sampling and reward computation."""
    methods = {
        "generate_and_score": "_generate_and_score_completions",
        "generate": "_generate",
        "reward": "_calculate_rewards",
    }
    for phase, attr in methods.items():
        if not callable(getattr(trainer, attr, None)):
            raise RuntimeError(f"GRPOTrainer.{attr} not found: this benchmark is written against trl==1.16.0")
        setattr(trainer, attr, timer.timed(phase, getattr(trainer, attr)))


def quiet(trainer: Any) -> None:
    """No per-step log lines or progress bars on stdout (main prints the JSON there); logs stay in state."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def step_logs(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TRL's per-step log entries (``logging_steps=1``), without the end-of-training summary."""
    return [entry for entry in log_history if "reward" in entry and "train_runtime" not in entry]


def check_one_round_per_step(trainer: Any, timer: StepTimer, logs: list[dict[str, Any]], steps: int) -> None:
    """Assert every trainer step was one generation round and one optimizer step."""
    if trainer.state.global_step != steps or len(timer.seconds) != steps or len(logs) != steps:
        raise AssertionError(
            f"expected {steps} steps: global_step={trainer.state.global_step}, timed={len(timer.seconds)}, "
            f"logged={len(logs)}"
        )
    for i, calls in enumerate(timer.calls):
        if calls["generate_and_score"] != 1 or calls["generate"] != 1 or calls["optimizer"] != 1:
            raise AssertionError(f"step {i}: expected one generation round and one optimizer step, got {calls}")
