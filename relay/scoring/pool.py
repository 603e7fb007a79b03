"""Parallel grading in spawned worker processes: a timer per item, and a hard per-batch backstop.

Each item is graded under its own ``item_timeout_s`` timer (``signal.setitimer`` in the worker's main
thread; math-verify's own alarms are switched off so they cannot cancel it): a pathological answer
scores 0 with ``"error": "timeout"`` and the next item is graded, so its chunk-mates keep their
scores. The batch-wide ``timeout_s`` stays as the backstop for a hang the timer cannot interrupt
(inside C code): that chunk scores 0 and its worker processes are replaced.

Items are graded by grader.grade (GSM8K), or, given ``graders``, each by the grader it names in
graders.GRADERS, so one batch can mix tasks; timers and error handling are the same for every grader.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import signal
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from math_verify.errors import TimeoutException

from relay.scoring.grade_settings import DEFAULT_SETTINGS, GradeSettings
from relay.scoring.grader import grade
from relay.scoring.graders import check_grader, grade_item, lenient_acc

_STARTUP_TIMEOUT_S = 120.0
_JOIN_TIMEOUT_S = 5.0


def _failed(error: str) -> dict[str, Any]:
    """The result of an item that could not be graded."""
    return {"score": 0.0, "acc": 0.0, "acc_lenient": 0.0, "extracted": None, "formatted": False, "error": error}


class _ItemTimeout(BaseException):
    """Raised by the item timer's signal handler (a BaseException, so no ``except Exception`` eats it)."""


def _on_item_timer(signum: int, frame: Any) -> None:
    raise _ItemTimeout


def _grade_chunk(
    responses: list[str],
    ground_truths: list[str],
    settings: GradeSettings,
    item_timeout_s: float | None = None,
    graders: Sequence[str] | None = None,
    grader_options: Mapping[str, Mapping[str, Any]] | None = None,
    lenient: bool = False,
) -> list[dict[str, Any]]:
    """Grade items one by one, item i by ``graders[i]`` with ``grader_options[graders[i]]`` (all by grade when
    ``graders`` is None) and ``settings``, with ``lenient`` each result with its ``acc_lenient``
    (:func:`relay.scoring.graders.lenient_acc`); an item that raises gets score 0 and an ``error`` string, one that
    runs past ``item_timeout_s`` (main thread only) gets ``"error": "timeout"``."""
    timed = bool(item_timeout_s) and threading.current_thread() is threading.main_thread()
    if timed:
        settings = replace(settings, math_verify_timeouts=False)  # one timer: ours
        previous = signal.signal(signal.SIGALRM, _on_item_timer)
    results = []
    try:
        for i, (response, ground_truth) in enumerate(zip(responses, ground_truths, strict=True)):
            try:
                if timed:
                    signal.setitimer(signal.ITIMER_REAL, item_timeout_s)
                name = "gsm8k" if graders is None else graders[i]
                options = (grader_options or {}).get(name)
                if graders is None:
                    result = grade(response, ground_truth, settings)
                else:
                    result = grade_item(name, response, ground_truth, options, settings)
                if lenient:
                    strict = result["acc"]
                    result["acc_lenient"] = lenient_acc(name, response, ground_truth, strict, options, settings)
                if timed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                results.append(result)
            except _ItemTimeout:
                results.append(_failed("timeout"))
            except (Exception, TimeoutException) as e:  # math-verify's TimeoutException is a BaseException
                if timed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                results.append(_failed(f"{type(e).__name__}: {e}"))
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return results


def _warm_up() -> None:
    """Run in each new worker so imports and math-verify's first parse are not billed to a batch. Without
    math-verify's 2 s timeouts: the first parse imports sympy, which on a starved machine (seen: a reward worker
    started at nice 19 beside a busy trainer) takes longer, and a timed-out parse of the warm-up's own ground
    truth would fail the worker's creation."""
    grade("#### 1", "1", GradeSettings(math_verify_timeouts=False))


def _checked_graders(
    graders: Sequence[str], grader_options: Mapping[str, Mapping[str, Any]] | None, n_items: int
) -> tuple[list[str], dict[str, Any]]:
    """``graders`` as a list and ``grader_options`` as plain dicts (they pickle to the workers), after checking
    that there is one grader per item and that graders.check_grader finds no problem with any grader named or
    its options; raises ValueError otherwise."""
    graders = list(graders)
    if len(graders) != n_items:
        raise ValueError(f"{n_items} responses but {len(graders)} graders")
    grader_options = {  # check_grader reports a non-mapping
        name: dict(options) if isinstance(options, Mapping) else options
        for name, options in (grader_options or {}).items()
    }
    problems = [
        problem
        for name in sorted(set(graders))
        for problem in check_grader(
            name, grader_options.get(name), grader_key="graders", options_key=f"grader_options[{name!r}]"
        )
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return graders, grader_options


class GraderPool:
    """Grades batches in ``workers`` spawned processes (``workers=0``: in the calling process).

    Each batch is split into one chunk per worker, so all chunks run at once and ``timeout_s``
    bounds the wall-clock time of the whole batch. Workers grade in their main thread, so
    math-verify's signal.alarm timeouts work. A chunk that overruns scores 0 with
    ``"error": "timeout"`` and the pool is torn down (stuck processes terminated) and rebuilt.
    """

    def __init__(self, workers: int) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers = workers
        self._executor: cf.ProcessPoolExecutor | None = None
        if workers:
            self._start()

    def _start(self) -> None:
        """Create the executor and wait until every worker process is up and warm."""
        self._executor = cf.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
        )
        warm = [self._executor.submit(_warm_up) for _ in range(self.workers)]
        done, not_done = cf.wait(warm, timeout=_STARTUP_TIMEOUT_S)
        if not_done:
            self._shutdown()
            raise RuntimeError(f"grader workers did not start within {_STARTUP_TIMEOUT_S:.0f} s")
        for future in done:
            future.result()

    def _shutdown(self) -> None:
        """Stop the executor, terminating (then killing) any worker that is still busy."""
        if self._executor is None:
            return
        # ProcessPoolExecutor has no public way to stop a running task (terminate_workers is 3.14+).
        processes = list((self._executor._processes or {}).values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(_JOIN_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()
        self._executor = None

    def grade_batch(
        self,
        responses: list[str],
        ground_truths: list[str],
        *,
        timeout_s: float = 10.0,
        item_timeout_s: float | None = None,
        graders: Sequence[str] | None = None,
        grader_options: Mapping[str, Mapping[str, Any]] | None = None,
        lenient: bool = False,
        settings: GradeSettings = DEFAULT_SETTINGS,
    ) -> list[dict[str, Any]]:
        """Grade ``responses[i]`` against ``ground_truths[i]``; results are in input order.

        ``item_timeout_s`` bounds each item (worker processes, or ``workers=0`` called from the main
        thread); ``timeout_s`` bounds the whole batch (worker processes only). ``settings`` (format score,
        last-number fallback, math-verify timeouts) go to every item's grader. ``graders[i]`` names the grader
        of item i (a key of graders.GRADERS) and ``grader_options[name]`` are that grader's options; with
        ``graders=None`` every item is graded by grader.grade. ``lenient`` adds each item's ``acc_lenient`` (a
        second grading of a wrong answer's last number: validation asks for it, training does not). An item
        timer replaces math-verify's alarm timeouts; with ``workers=0`` off the main thread nothing is timed and
        math-verify's alarm timeouts are off whatever ``settings.math_verify_timeouts`` says. Raises ValueError
        when ``graders`` has the wrong length or when graders.check_grader finds a problem with a grader it names
        or that grader's options.
        """
        if len(responses) != len(ground_truths):
            raise ValueError(f"{len(responses)} responses but {len(ground_truths)} ground truths")
        if graders is not None:
            graders, grader_options = _checked_graders(graders, grader_options, len(responses))
        if not self.workers:
            if threading.current_thread() is not threading.main_thread():
                settings = replace(settings, math_verify_timeouts=False)  # signal.alarm works in the main thread only
            return _grade_chunk(responses, ground_truths, settings, item_timeout_s, graders, grader_options, lenient)
        if self._executor is None:
            raise RuntimeError("GraderPool is closed")
        if not responses:
            return []
        return self._grade_in_workers(
            responses, ground_truths, settings, timeout_s, item_timeout_s, graders, grader_options, lenient
        )

    def _grade_in_workers(
        self,
        responses: list[str],
        ground_truths: list[str],
        settings: GradeSettings,
        timeout_s: float,
        item_timeout_s: float | None,
        graders: list[str] | None,
        grader_options: Mapping[str, Mapping[str, Any]] | None,
        lenient: bool,
    ) -> list[dict[str, Any]]:
        """Grade one chunk per worker, all at once, waiting at most ``timeout_s`` for the lot; a chunk that
        overruns or fails scores 0 with its error, and then the workers are replaced."""
        size = -(-len(responses) // self.workers)
        spans = [(lo, min(lo + size, len(responses))) for lo in range(0, len(responses), size)]
        submit = self._executor.submit
        futures = {
            submit(
                _grade_chunk,
                responses[lo:hi],
                ground_truths[lo:hi],
                settings,
                item_timeout_s,
                None if graders is None else graders[lo:hi],
                grader_options,
                lenient,
            ): (lo, hi)
            for lo, hi in spans
        }
        done, _ = cf.wait(futures, timeout=timeout_s)
        results: list[dict[str, Any]] = [_failed("timeout") for _ in responses]
        healthy = len(done) == len(futures)
        for future in done:
            lo, hi = futures[future]
            try:
                results[lo:hi] = future.result()
            except Exception as e:  # e.g. BrokenProcessPool when a worker died
                results[lo:hi] = [_failed(f"{type(e).__name__}: {e}") for _ in range(lo, hi)]
                healthy = False
        if not healthy:
            self._shutdown()
            self._start()
        return results

    def close(self) -> None:
        """Terminate the worker processes; the pool cannot be used afterwards."""
        self._shutdown()

    def __enter__(self) -> GraderPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
