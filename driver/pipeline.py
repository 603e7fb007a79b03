"""Bounded-staleness pipeline (``trainer.max_staleness`` = k >= 1): the phases before the update of step
s+k (rollout, actor_ref || reward, advantage) run while the learner updates step s.

One background thread (a one-worker executor) runs, strictly in the order they were queued, every
collect and every weight sync; the main thread runs the updates. At step s the main thread queues the
collect of step s+k, takes the collect of step s (waiting only if it is not done yet), updates, and queues
the sync of the new weights. The executor's queue is therefore always

    ..., collect(s+k), sync(s+1), collect(s+k+1), sync(s+2), ...

so the collect of step t samples with the weights of update t-k-1 and is exactly k versions behind the
learner when step t trains on it (``offpolicy/staleness``), whatever the timing: a run is repeatable, and
the collect thread is the only one that touches the data cursor, the rollout's weights and
``roles.weights`` while the pipeline runs. Drawing the prompts inside the collect also covers dynamic
sampling's extra passes, and a step's ``data/epochs_done`` is read there, right after its own draws: read on the
main thread it would count the draws of the collect running ahead, as far as that one had got.

A step's row carries the figures of the load that ran last before its collect (``sync/version``,
``sync/rollout_load_seconds``, ``timing/sync``, ...): the load of the weights its samples came from, the same
whatever the timing (the newest load finished when the row is made would depend on how long the update took).

``drain()`` waits for everything queued (before a checkpoint or a validation, which therefore see the
same state as the on-policy loop): a checkpoint stores the collected batches of the steps ahead and the figures
of the last load (``inflight/``: safetensors and JSON, :mod:`relay.checkpoint.batch_io`), and a resumed run puts
them back, so ``--resume`` continues bit for bit, its rows included.
"""

from __future__ import annotations

import json
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from driver.collect import collect_phase
from driver.role_group import Roles, Weights
from driver.step_metrics import derived_timing_metrics, memory_metrics, reward_metrics, staleness_metrics
from driver.timing import PhaseTimer
from relay.checkpoint.batch_io import load_batch, save_batch
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.grpo.kl_controller import KLController
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.tasks.prompt_source import PromptSource

Collected = tuple[DataProto, dict[str, float]]
LAST_LOAD_NAME = "last_load.json"  # in a checkpoint's inflight/: the figures of the pipeline's last load


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def save_inflight(directory: Path, collected: list[tuple[int, Collected]], last_load: dict[str, float]) -> None:
    """Write the collected batches of the steps ahead into ``directory`` (``steps.json`` lists them in order) and
    the last load's figures (:data:`LAST_LOAD_NAME`)."""
    directory.mkdir(parents=True, exist_ok=True)
    for step, (batch, metrics) in collected:
        save_batch(directory, f"step_{step:06d}", batch, metrics)
    (directory / "steps.json").write_text(json.dumps([step for step, _ in collected]))
    (directory / LAST_LOAD_NAME).write_text(json.dumps(last_load))


def load_inflight(directory: Path) -> list[tuple[int, Collected]]:
    """The collected batches :func:`save_inflight` wrote, in step order."""
    steps = json.loads((directory / "steps.json").read_text())
    return [(int(step), load_batch(directory, f"step_{int(step):06d}")) for step in steps]


class RolloutPipeline:
    """The collects of the next ``k`` steps, queued ahead of the update, and the syncs between them."""

    def __init__(
        self,
        roles: Roles,
        cfg: RelayConfig,
        prompts: PromptSource,
        k: int,
        start_step: int,
        kl_control: KLController,
    ) -> None:
        self.roles, self.cfg, self.prompts, self.k, self.kl_control = roles, cfg, prompts, k, kl_control
        self.next_step = start_step  # the next step whose collect is not queued yet
        self.pending: deque[tuple[int, Future]] = deque()
        self.syncs: deque[Future] = deque()
        self.last_load: dict[str, float] = {}  # the figures of the newest load the collect thread ran
        self.load_restarts = 0  # actors restarted during the loads since the last collect began
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-collect")

    def restore(self, directory: Path) -> None:
        """Put back the collected batches a checkpoint stored (the steps right after it) and its last load's
        figures (a checkpoint written without them leaves none: the next collect's row has no ``sync/*``)."""
        if (directory / LAST_LOAD_NAME).is_file():
            self.last_load = json.loads((directory / LAST_LOAD_NAME).read_text())
        for step, collected in load_inflight(directory):
            if step != self.next_step:
                raise ValueError(f"{directory}: holds the collect of step {step}, expected step {self.next_step}")
            self.pending.append((step, _done(collected)))
            self.next_step += 1

    def _collect(self, step: int) -> Collected:
        timer, restarts_before = PhaseTimer(step), len(self.roles.restarted)
        with timer.phase(sm.TIMING_COLLECT):
            prompts = self.prompts.next_batch()
            more = self.prompts.next_batch if self.cfg.algorithm.filter_groups.enable else None
            observe = self.prompts.observe_graded if self.cfg.data.revisit_unsolved.enable else None
            batch, metrics = collect_phase(self.roles, prompts, self.cfg, step, self.kl_control, more, observe)
            # the cursor after this step's draws (extra passes included) and grades, read here: the main thread
            # would read it while the next collect draws, a figure of the timing
            epochs_done = float(self.prompts.epochs_done)
            revisits = self.prompts.revisit_metrics() if observe is not None else {}
        restarts = float(len(self.roles.restarted) - restarts_before)
        return batch, {
            sm.STEP: step,
            **metrics,
            **revisits,
            om.DATA_EPOCHS_DONE: epochs_done,
            sm.RECOVERY_RESTARTS: restarts,
            **timer.metrics(),
        }

    def fill(self, step: int) -> None:
        """Queue the collects of every step up to ``step + k``, past the run's last step too: the queue order
        (hence each collect's weights) must not depend on where a run stops, or a run resumed from its final
        checkpoint would differ from one that never stopped. A final checkpoint stores those collects; without
        one they are cancelled or dropped at :meth:`close` (they overlap the last update)."""
        while self.next_step <= step + self.k:
            self.pending.append((self.next_step, self._pool.submit(self._collect_after_load, self.next_step)))
            self.next_step += 1

    def take(self, step: int) -> Collected:
        """Step ``step``'s collected batch and its metrics (queues the collects ahead first)."""
        self.fill(step)
        queued, future = self.pending.popleft()
        if queued != step:
            raise RuntimeError(f"pipeline out of order: asked for step {step}, next collected is {queued}")
        timer = PhaseTimer(step)
        with timer.phase(sm.TIMING_ROLLOUT_WAIT):
            batch, m = future.result()
        self._check_syncs()
        return batch, {**m, **timer.metrics()}

    def _collect_after_load(self, step: int) -> Collected:
        """:meth:`_collect` in the collect thread, its metrics with the figures of the load that ran before it and
        the restarts made during that load (``recovery/restarts``: a rollout that died loading the weights)."""
        loaded, load_restarts, self.load_restarts = dict(self.last_load), self.load_restarts, 0
        batch, m = self._collect(step)
        if load_restarts:
            m[sm.RECOVERY_RESTARTS] = m.get(sm.RECOVERY_RESTARTS, 0.0) + load_restarts
        return batch, {**loaded, **m}

    def _sync(self, weights_ref: Weights, version: int) -> dict[str, float]:
        before = len(self.roles.restarted)
        figures = {**self.roles.sync(weights_ref, version), sm.SYNC_VERSION: float(version)}
        self.load_restarts += len(self.roles.restarted) - before
        return figures

    def _load(self, weights_ref: Weights, version: int) -> None:
        self.last_load = self._sync(weights_ref, version)

    def queue_sync(self, weights_ref: Weights, version: int) -> None:
        """Load ``weights_ref`` into the rollout (and any actor copy) once the collects queued so far are done."""
        self.syncs.append(self._pool.submit(self._load, weights_ref, version))

    def _check_syncs(self) -> None:
        """Raise the error of a finished sync that failed (the finished ones are dropped)."""
        while self.syncs and self.syncs[0].done():
            self.syncs.popleft().result()

    def drain(self) -> None:
        """Wait until every queued collect and sync is done (errors surface here)."""
        for _, future in self.pending:
            future.result()
        for future in self.syncs:
            future.result()
        self._check_syncs()

    def save_inflight(self, directory: Path) -> None:
        """Drain, then store the collected batches of the steps ahead in ``directory`` (a checkpoint's
        ``inflight/``)."""
        self.drain()
        save_inflight(directory, [(step, future.result()) for step, future in self.pending], self.last_load)

    def close(self) -> None:
        """Cancel the collects not started; one still running ends when the roles stop (its result is unused)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_pipelined_step(roles: Roles, pipe: RolloutPipeline, cfg: RelayConfig, step: int) -> Collected:
    """Step ``step`` of a pipelined run: take its collected batch, update, queue the sync; returns the batch
    and the step's metrics (the collect's, the update's and the ``offpolicy/*`` ones)."""
    timer = PhaseTimer(step)
    with timer.phase(sm.TIMING_STEP):
        batch, m = pipe.take(step)
        weights, update_metrics = roles.learner.update(batch, step, cfg.rollout.sleep_during_update)
        pipe.queue_sync(weights, step + 1)  # the load runs in the collect thread
    m = {**m, **update_metrics}
    m.update({**reward_metrics(batch, m), **memory_metrics(m), **staleness_metrics(m, batch, step)})
    m.update(timer.metrics())
    # The load before this step's collect ran in the collect thread, beside other work: none of it is busy time here.
    sync_wall = m.get(sm.TIMING_SYNC, 0.0)
    m.update(derived_timing_metrics(m, collect_busy=m[sm.TIMING_ROLLOUT_WAIT], sync_wall=sync_wall, sync_busy=0.0))
    return batch, m
