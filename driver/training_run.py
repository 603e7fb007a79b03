"""One training run on the connected Ray: set up, run the step loop, tear down (``trainer.train``).

:class:`TrainingRun` holds what lives as long as the run: the prompts, the roles, the metric sinks, the
pipeline (``trainer.max_staleness`` >= 1) and the wall-clock budget. Its methods are the run's stages:

    load_data -> open -> start (roles, resume) -> loop (step, validate, record, checkpoint) -> close

and the two ways a run ends early: a plan the cluster cannot place (exit 2) and a role that failed for good
(exit 1, after an emergency checkpoint when the learner is alive).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from driver.checkpoints import CheckpointWriteError, restore_checkpoint, save_checkpoint, truncate_metrics
from driver.console import header_lines, table_columns, table_header, table_row
from driver.dashboard_metrics import StepGauges
from driver.launch import actor_nodes, start_roles, stop_roles
from driver.pipeline import RolloutPipeline, run_pipelined_step
from driver.role_group import Roles
from driver.run_record import (
    emergency_checkpoint,
    emergency_point,
    print_resume_hint,
    record_start,
    report_role_failure,
)
from driver.sft_step import run_sft_step, run_sft_validation
from driver.step import SyncFailedAfterUpdate, run_step
from driver.stop_signal import GracefulStop
from driver.validation import VALIDATION_DIR, run_validation
from placement.plan import PlacementError
from relay.checkpoint.store import INFLIGHT_DIR
from relay.config import LoadedConfig
from relay.data_proto import DataProto
from relay.faults import fault_point
from relay.grpo.kl_controller import KLController
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.run import EventLog, build_sinks, close_sinks, timeline
from relay.run.budget import WallClockBudget
from relay.run.logs import DRIVER_LOG, LOGS_DIR, progress_bar_wanted, route_library_logs, unroute_library_logs
from relay.run.timeline import Timeline
from relay.sft.source import SftSource
from relay.startup import start_up_with_collector_paused
from relay.tasks.curriculum import CurriculumSource, curriculum_validation_prompts
from relay.tasks.prompt_source import PromptSource
from roles.role_call import RoleFailedError


class TrainingRun:
    """A run's state from its first prompt to its last checkpoint (see the module docstring for the stages)."""

    def __init__(
        self, loaded: LoadedConfig, model_path: Path, run_dir: Path, checkpoint: Path | None, quiet: bool
    ) -> None:
        self.loaded, self.cfg = loaded, loaded.cfg
        self.model_path, self.run_dir, self.checkpoint, self.quiet = model_path, run_dir, checkpoint, quiet
        self.roles: Roles | None = None
        # The KL-in-reward coefficient's controller (algorithm.kl_ctrl), the driver's run state beside the actors:
        # the advantage phase reads and adapts it, checkpoints keep its value. None: a fixed algorithm.kl_coef.
        self.kl_control = KLController.from_config(self.cfg.algorithm)
        self.actor_nodes: dict[str, str] = {}  # each actor's node (the run's ``roles`` event)
        self.sinks: list[Any] = []
        self.gauges: StepGauges | None = None
        self.pipe: RolloutPipeline | None = None
        self.library_logs: Any = None
        self.last_metrics: dict[str, float] = {}  # the newest step's, for the memory figures of a role that dies
        self.step = self.start_step = 0
        self.last_saved = -1
        # Set by the stages, in their order (load_data, open, start); None until then.
        # SftSource: a warm start (sft.enable); CurriculumSource: data.curriculum
        self.prompts: PromptSource | SftSource | CurriculumSource | None = None
        self.val_prompts: DataProto | None = None  # the validation problems (trainer.test_freq > 0)
        self.data_state: dict | None = None  # the data cursor before the current step (a checkpoint stores it)
        # A step whose sync failed for good after its update: its row, recorded by the run that resumes after it.
        self.unrecorded: dict | None = None
        self.config_yaml = ""
        self.log_dir: Path | None = None  # the role logs' directory in quiet mode
        self.events: EventLog | None = None
        self.spans: Timeline | None = None
        self.budget: WallClockBudget | None = None
        self.stop = GracefulStop()  # SIGTERM: stop after the step in flight, with a checkpoint (driver/stop_signal.py)

    # -- setup -----------------------------------------------------------------------------------------------

    @start_up_with_collector_paused
    def load_data(self) -> None:
        """Tokenise the training (and validation) prompts; a bad dataset raises ``DatasetError`` or
        ``FileNotFoundError`` before anything is written."""
        from relay.tasks.prompt_cache import LazyTokenizer
        from relay.tasks.prompt_source import validation_prompts

        data = self.cfg.data
        tokenizer = LazyTokenizer(self.model_path)  # loaded only if a split misses the prompt cache
        batch = self.loaded.derived.effective_global_prompts
        self.val_prompts = None
        if self.cfg.sft.enable:  # a warm start: traces, and the validation traces' loss
            self.prompts = SftSource.from_config(self.cfg, tokenizer, batch)
            if self.cfg.trainer.test_freq > 0:
                val = SftSource.from_config(self.cfg, tokenizer, batch, split="val")
                self.val_prompts = val.batch_of(list(range(len(val.uids))))
        elif data.curriculum.levels:  # one source per level, validated on each level's own split
            self.prompts = CurriculumSource.from_config(data, tokenizer, batch)
            if self.cfg.trainer.test_freq > 0:
                self.val_prompts = curriculum_validation_prompts(data, tokenizer, self.cfg.trainer.val_samples)
        else:
            self.prompts = PromptSource.from_config(data, tokenizer, batch)
            if self.cfg.trainer.test_freq > 0:
                self.val_prompts = validation_prompts(data, tokenizer, self.cfg.trainer.val_samples)
        self.data_state = self.prompts.batcher.state_dict()

    def open(self, dashboard_url: str | None) -> None:
        """The run directory: its ``config.yaml``, the library logs (quiet mode), the header lines, the event log
        and the timeline."""
        from omegaconf import OmegaConf

        self.config_yaml = OmegaConf.to_yaml(self.cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(self.config_yaml)
        self.log_dir = self.run_dir / LOGS_DIR if self.quiet else None
        if self.quiet:
            self.library_logs = route_library_logs(self.run_dir / LOGS_DIR / DRIVER_LOG)
        overrides = [o.describe() for o in self.loaded.env_overrides]
        for line in header_lines(self.run_dir, self.model_path, dashboard_url, self.quiet, overrides):
            tqdm.write(line)
        self.events = EventLog(self.run_dir)
        self.spans = Timeline()
        timeline.use(self.spans)

    def start(self) -> None:
        """Record the start, start the roles, resume from the checkpoint when there is one, and open the metric
        sinks, the dashboard gauges, the pipeline and the wall-clock budget."""
        from omegaconf import OmegaConf

        from placement.cluster import ray_nodes
        from placement.fit import plan_for

        cfg, prompts = self.cfg, self.prompts
        nodes = ray_nodes()
        record_start(self.loaded, self.model_path, self.run_dir, nodes, self.checkpoint, self.events)
        self.events.write("data", **prompts.summary())
        plan = plan_for(cfg, nodes)
        self.roles = start_roles(
            self.loaded, plan, str(self.model_path), run_id=self.run_dir.name, log_dir=self.log_dir
        )
        self._record_actor_nodes()
        if self.checkpoint is not None:
            self._resume(self.checkpoint)
        config = OmegaConf.to_container(cfg, resolve=True)
        resume_step = self.start_step if self.checkpoint is not None else None
        self.sinks = build_sinks(self.run_dir, self.run_dir.name, config, resume_step=resume_step)
        self.gauges = StepGauges(self.run_dir.name)
        tqdm.write(f"roles started in Ray namespace {self.roles.namespace}: {', '.join(self.roles.handles())}")
        if cfg.trainer.max_staleness > 0:
            k, control = cfg.trainer.max_staleness, self.kl_control
            self.pipe = RolloutPipeline(self.roles, cfg, prompts, k, self.start_step, control)
            if self.checkpoint is not None and (self.checkpoint / INFLIGHT_DIR).exists():
                self.pipe.restore(self.checkpoint / INFLIGHT_DIR)
            self.data_state = None  # the cursor runs ahead of the step: no emergency checkpoint of "before the step"
        self.budget = WallClockBudget(cfg.trainer.time_budget_minutes)

    def _record_actor_nodes(self) -> None:
        """Each actor's node (for the message of a lost node), process and Ray actor id, and the sync path, as a
        ``roles`` event."""
        self.actor_nodes = actor_nodes(self.roles)
        processes = {
            name: {k: info.get(k) for k in ("pid", "actor_id")} for name, info in self.roles.ready_info.items()
        }
        self.events.write("roles", nodes=self.actor_nodes, processes=processes, weight_sync=self.roles.weight_sync)

    def _resume(self, checkpoint: Path) -> None:
        """The learner state, data cursor and metrics history of ``checkpoint``."""
        state = restore_checkpoint(self.roles, checkpoint)
        if self.kl_control is not None and state.get("kl_coef") is not None:
            self.kl_control.value = float(state["kl_coef"])
        self.prompts.batcher.load_state_dict(state["data"])
        self.start_step = self.last_saved = int(state["next_step"])
        self.unrecorded = state.get("unrecorded")  # recorded once the sinks are open (loop)
        dropped = truncate_metrics(self.run_dir / "metrics.jsonl", self.start_step)
        self.events.write("resume", checkpoint=checkpoint, step=self.start_step, dropped_metric_lines=dropped)
        tqdm.write(f"resumed from {checkpoint} at step {self.start_step} ({dropped} later metric lines dropped)")

    # -- the loop --------------------------------------------------------------------------------------------

    def loop(self) -> None:
        """The steps from ``start_step`` to ``trainer.total_training_steps`` (or an earlier stop), a checkpoint every
        ``trainer.save_freq`` steps and, with ``trainer.save_final``, after the last one."""
        total, save_freq = self.cfg.trainer.total_training_steps, self.cfg.trainer.save_freq
        bar = progress_bar_wanted()
        if not bar:
            minutes = self.cfg.trainer.time_budget_minutes
            budget_note = f" or {minutes} minutes" if minutes else ""
            tqdm.write(
                f"progress: steps {self.start_step}-{total - 1}{budget_note}, one row each "
                "(no progress bar: not a terminal)"
            )
        tqdm.write(table_header(self.columns))
        if self.unrecorded is not None:
            self._record_unrecorded(self.unrecorded)
            self.unrecorded = None
        self.step = self.start_step
        steps = range(self.start_step, total)
        for step in tqdm(steps, desc="grpo steps", unit="step", file=sys.stderr, disable=not bar):
            self.step = step
            reason = self._stop_reason(step)
            if reason is not None:
                tqdm.write(reason)
                break
            self._record(step, self._run_step(step))
            fault_point("driver.between_steps", step)
            if save_freq > 0 and (step + 1) % save_freq == 0:
                self._checkpoint(step + 1)
        else:
            self.step = total
        if (self.cfg.trainer.save_final or save_freq > 0 or self.stop.requested) and self.last_saved != self.step:
            self._checkpoint(self.step)
        self.events.write("finish", steps_done=self.step)

    def _stop_reason(self, step: int) -> str | None:
        """Why the run stops before ``step`` (a SIGTERM arrived, the data's epochs are done, or the time budget would
        be overrun)."""
        trainer = self.cfg.trainer
        if self.stop.requested:
            self.events.write("stop", step=step, signal="SIGTERM")
            return self.stop.reason(step, self.budget.last_step_s)
        if trainer.total_epochs is not None and self.prompts.epochs_done >= trainer.total_epochs:
            return f"stopping: trainer.total_epochs={trainer.total_epochs} passes over the data done"
        if self.budget.next_step_fits():
            return None
        self.events.write("time_budget", step=step, elapsed_s=self.budget.elapsed_s())
        return (
            f"stopping: trainer.time_budget_minutes={trainer.time_budget_minutes} would be overrun by "
            f"another step ({self.budget.elapsed_s() / 60:.1f} min so far, the last step took "
            f"{self.budget.last_step_s / 60:.1f} min)"
        )

    def _run_step(self, step: int) -> dict[str, float]:
        """One step (on-policy or pipelined), the validation due after it, and the run-level metrics. When the
        update was applied but the sync after it or the validation fails for good, the step's row waits in
        :attr:`unrecorded` for the emergency checkpoint: the run that resumes from it runs the validation due and
        records the row, so the run's record loses no step."""
        self.budget.step_started()
        try:
            row, due = self._finish_step(step, self._train(step))
        except SyncFailedAfterUpdate as failed:
            row, due = self._finish_step(step, failed.metrics)
            self.unrecorded = {"step": step, "metrics": row, "validate": due}
            raise
        if due:
            self.unrecorded = {"step": step, "metrics": row, "validate": True}  # until the validation is done
            restarted = len(self.roles.restarted)
            row.update(self._validate(step + 1))
            if len(self.roles.restarted) > restarted:  # a role restarted inside the validation
                row[sm.RECOVERY_RESTARTS] = row.get(sm.RECOVERY_RESTARTS, 0.0) + len(self.roles.restarted) - restarted
            self.unrecorded = None
        self._notice_restarts(row)
        row[sm.TIME_ELAPSED] = self.budget.elapsed_s()  # since the first step started: the x of wall-clock plots
        return row

    def _train(self, step: int) -> dict[str, float]:
        if self.cfg.sft.enable:
            self.data_state = self.prompts.batcher.state_dict()
            return run_sft_step(self.roles, self.prompts.next_batch(), step)
        if self.pipe is None:
            self.data_state = self.prompts.batcher.state_dict()  # the cursor before this step's prompts
            batch = self.prompts.next_batch()
            observe = self.prompts.observe_graded if self.cfg.data.revisit_unsolved.enable else None
            return run_step(self.roles, batch, self.cfg, step, self.kl_control, self.prompts.next_batch, observe)[1]
        return run_pipelined_step(self.roles, self.pipe, self.cfg, step)[1]

    def _finish_step(self, step: int, metrics: dict[str, float]) -> tuple[dict[str, float], bool]:
        """The step's run-level metrics and the curriculum's observation; returns the metrics and whether a
        validation is due after the step."""
        # the cursor after the step's draws; a pipeline's collect records it itself (the cursor here runs ahead)
        metrics.setdefault(om.DATA_EPOCHS_DONE, float(self.prompts.epochs_done))
        if self.cfg.data.revisit_unsolved.enable:
            metrics = {**self.prompts.revisit_metrics(), **metrics}
        if isinstance(self.prompts, CurriculumSource):
            self._advance_curriculum(step, metrics)
        self.budget.step_ended()
        test_freq, total = self.cfg.trainer.test_freq, self.cfg.trainer.total_training_steps
        last = step + 1 == total or not self.budget.next_step_fits()
        return metrics, self.val_prompts is not None and ((step + 1) % test_freq == 0 or last)

    def _notice_restarts(self, row: dict[str, float]) -> None:
        """The restarts Ray made with no call failing (``recovery/ray_restarts``: an actor that died between two
        calls), and each actor's node in the events when any actor restarted (it may sit on another node now)."""
        row[sm.RECOVERY_RAY_RESTARTS] = float(self.roles.ledger.notice(self.roles.handles(), self.roles.ready_info))
        if row[sm.RECOVERY_RAY_RESTARTS] or row.get(sm.RECOVERY_RESTARTS):
            self._record_actor_nodes()

    def _record_unrecorded(self, unrecorded: dict) -> None:
        """The row of the step before the resume point whose sync failed for good (the emergency checkpoint kept
        it), with the validation due after it, run now on the weights the resume loaded."""
        row = dict(unrecorded["metrics"])
        if unrecorded["validate"]:
            row.update(self._validate(unrecorded["step"] + 1))
        self._record(int(unrecorded["step"]), row)

    def _advance_curriculum(self, step: int, metrics: dict[str, float]) -> None:
        """The step's training accuracy into the curriculum, its figures into ``metrics``, and a promotion on the
        terminal and in the events."""
        curriculum = self.prompts.curriculum
        metrics.update(self.prompts.observe(metrics[om.REWARD_ACCURACY]))
        if metrics[om.CURRICULUM_PROMOTED]:
            self.events.write("curriculum", step=step + 1, level=curriculum.level, name=curriculum.name)
            tqdm.write(f"curriculum: level {curriculum.level} ({curriculum.name}) from step {step + 1}")

    def _validate(self, step: int) -> dict[str, float]:
        """The ``val/*`` metrics of the weights after ``step`` updates (a pipeline is drained first, so it
        validates the same weights as the on-policy loop)."""
        if self.pipe is not None:
            self.pipe.drain()
        trainer = self.cfg.trainer
        if self.cfg.sft.enable:
            metrics = run_sft_validation(self.roles, self.val_prompts, step)
        else:
            responses = self.run_dir / VALIDATION_DIR / f"step_{step:06d}.jsonl"  # each problem's answers
            metrics = run_validation(
                self.roles, self.val_prompts, trainer.val_k, step, seed=trainer.seed, responses=responses
            )
        self.events.write("validation", step=step, **{k: v for k, v in metrics.items() if k.startswith(vm.VAL_PREFIX)})
        return metrics

    def _record(self, step: int, metrics: dict[str, float]) -> None:
        """The step's metrics into every sink, the event log (skipped batches), the gauges, the timeline file and
        the terminal's table."""
        for sink in self.sinks:
            sink.write(step, metrics)
        if metrics.get(pm.LEARNER_SKIPPED_STEPS, 0) > 0:
            self.events.write(
                "skipped_batch",
                step=step,
                optimizer_steps_skipped=metrics[pm.LEARNER_SKIPPED_STEPS],
                consecutive=metrics.get(pm.LEARNER_CONSECUTIVE_SKIPS),
            )
        self.gauges.publish(metrics)
        self.last_metrics = metrics
        self.spans.write(self.run_dir)
        tqdm.write(table_row(metrics, self.columns))

    @property
    def columns(self) -> Any:
        """The step table's columns (:func:`driver.console.table_columns`)."""
        return table_columns(self.cfg.rollout.agent.enable, self.cfg.sft.enable, bool(self.cfg.data.curriculum.levels))

    def _checkpoint(self, next_step: int) -> None:
        """Save ``checkpoints/step_<next_step>`` (a pipeline is drained first: the data cursor is final then)."""
        write_inflight = None
        if self.pipe is not None:
            self.pipe.drain()
            write_inflight = self.pipe.save_inflight
        data_state = self.prompts.batcher.state_dict()
        model_path = str(self.model_path)
        files = (self.cfg, self.config_yaml, model_path, write_inflight)
        try:
            path = save_checkpoint(self.roles, self.run_dir, next_step, data_state, *files, kl_coef=self.kl_coef())
        except OSError as exc:
            raise CheckpointWriteError(next_step, exc) from exc
        self.last_saved = next_step
        self.events.write("checkpoint", step=next_step, path=path)
        tqdm.write(f"checkpoint: {path}")

    # -- endings ---------------------------------------------------------------------------------------------

    def placement_failed(self, exc: PlacementError) -> int:
        """The plan does not fit the cluster: an ``error`` event and exit code 2."""
        self.events.write("error", kind="placement", message=str(exc))
        print(f"placement error: {exc}", file=sys.stderr)
        return 2

    def checkpoint_failed(self, exc: CheckpointWriteError) -> int:
        """The driver could not write a checkpoint (a full disk): an ``error`` event, the error and how to go on on
        the terminal; exit code 1."""
        self.events.write("error", kind="checkpoint_write", step=exc.step, message=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        print_resume_hint(self.run_dir)
        return 1

    def role_failed(self, exc: RoleFailedError) -> int:
        """A role failed for good: an ``error`` event, its log tail then the error and its memory figures on the
        terminal, an emergency checkpoint when the learner is alive; exit code 1."""
        report_role_failure(exc, self.events, self.run_dir, self.step, self.quiet, self.last_metrics, self.actor_nodes)
        step, data_state = self.step, self.data_state
        if self.roles is not None and self.data_state is not None:  # on-policy: the cursor is the step's own
            updated = self.roles.last_updated_step
            step, data_state = emergency_point(self.step, self.data_state, updated, self.prompts.batcher.state_dict())
        unrecorded = self.unrecorded if step == self.step + 1 else None  # the row of the step it is after
        files = (self.cfg, self.config_yaml, self.model_path, self.events)
        emergency_checkpoint(self.roles, exc, self.run_dir, step, data_state, *files, self.kl_coef(), unrecorded)
        return 1

    def kl_coef(self) -> float | None:
        """The adaptive KL-in-reward coefficient reached, for a checkpoint (None: a fixed ``algorithm.kl_coef``)."""
        return None if self.kl_control is None else self.kl_control.value

    def close(self) -> None:
        """Stop the pipeline, the gauges, the sinks and the roles; give the library logs back to the terminal."""
        timeline.use(None)
        if self.pipe is not None:
            self.pipe.close()
        if self.gauges is not None:
            self.gauges.close()
        close_sinks(self.sinks)
        stop_roles(self.roles)
        if self.library_logs is not None:
            unroute_library_logs(self.library_logs)
