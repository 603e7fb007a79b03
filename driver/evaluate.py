"""Evaluate a model or a Relay checkpoint on the held-out problems of a run's task, in one process (no Ray).

    python -m driver.evaluate --checkpoint PATH [--samples N] [--k K] [--engine vllm|hf]
        [--max-new-tokens T] [--config PRESET] [--set key=value ...] [--seed S] [--out FILE] [--responses FILE]

``PATH`` is an HF model directory (or ``smollm2-135m``), a Relay checkpoint
(``outputs/<run>/checkpoints/step_NNNNNN``: its ``hf/`` export is evaluated) or a run directory
(``outputs/<run>``: its newest checkpoint). The settings are ``--config`` if given, else the run's own
``config.yaml`` when ``PATH`` is inside a run, else ``configs/default.yaml``; then ``--set``, then the flags
(``--samples`` = ``trainer.val_samples``, ``--k`` = ``trainer.val_k``, ``--engine`` = ``rollout.engine``,
``--max-new-tokens`` = ``data.max_response_length``). Its own defaults are ``--samples 100 --k 0``: the first 100
problems, greedy only, 2-3 minutes for SmolLM2-135M on a 2-core CPU; ``--samples 1319 --k 4`` is the whole
test set with pass@4 (hours on a CPU).

It does what a validation during training does, with the same code: the first ``val_samples`` problems
of ``data.test_path``, one greedy response and ``k`` samples each at the rollout's temperature / top-p /
top-k (``RolloutWorker.evaluate``), graded by the reward role's grader (``RewardWorker.score``). It
prints one JSON line of the ``val/*`` metrics (strict and lenient accuracy apart, :mod:`relay.evaluation.report`),
e.g. ``{"val/accuracy_greedy": 0.05, "val/lenient_accuracy_greedy": 0.2, "val/pass@4": 0.12, ...}``,
and writes it to ``--out`` when given. ``--responses FILE`` also writes every response with its grade, one JSON
line each (:func:`relay.evaluation.report.response_records`: question, ground truth, response text, correct,
finished, tokens, tool calls), to read what the model got wrong. A bad path or config exits with code 2 and a
one-line reason.

The terminal keeps Relay's own lines (what is evaluated, the progress bar, errors); everything the libraries print
(vLLM's engine, transformers, math-verify, a child process) goes to a log file named on the first line, as
``trainer.py`` does; ``--verbose`` (or ``RELAY_LOG_LEVEL=verbose``) shows it on the terminal instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from relay.metrics import validation as vm
from relay.repo import DEFAULT_PRESET

EXPECTED = (
    "expected an HF model directory (with config.json), a PEFT LoRA adapter directory (with adapter_config.json), "
    "a Relay checkpoint (outputs/<run>/checkpoints/step_NNNNNN, with an hf/ export) or a run directory (outputs/<run>)"
)


# The defaults finish in minutes on a CPU: the first 100 test problems, the greedy answer only.
DEFAULT_SAMPLES = 100
DEFAULT_K = 0


class EvaluateError(ValueError):
    """A path or setting the evaluator cannot use; the message is meant for the user as is."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Relay: strict and lenient accuracy, pass@k, mean@k on held-out problems")
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="HF model dir, checkpoint dir or run dir")
    p.add_argument("--samples", type=int, default=None, help="test problems, the first N (default: 100)")
    p.add_argument("--k", type=int, default=None, help="samples per problem besides the greedy one (default: 0)")
    p.add_argument("--engine", choices=["vllm", "hf"], default=None, help="rollout engine (default rollout.engine)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="tokens per response (data.max_response_length)")
    p.add_argument("--config", default=None, help="YAML preset (default: the run's config.yaml or default.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="config override")
    p.add_argument("--seed", type=int, default=None, help="seed of the samples (default trainer.seed)")
    p.add_argument("--out", default=None, help="also write the JSON line to this file")
    p.add_argument("--responses", default=None, metavar="FILE", help="write each response and its grade (JSONL)")
    p.add_argument("--verbose", action="store_true", help="the libraries' output on the terminal, not in a log file")
    return p.parse_args(argv)


def resolve_checkpoint(path: str) -> tuple[Path, Path | None]:
    """``(HF model directory, the run's config.yaml or None)`` for ``--checkpoint PATH``.

    Worked examples: ``outputs/r/checkpoints/step_000004`` -> ``(…/step_000004/hf, outputs/r/config.yaml)``;
    ``outputs/r`` -> its newest checkpoint's ``hf/``; a directory with ``config.json`` (or a LoRA run's PEFT
    ``adapter_config.json``, merged into its base model by :func:`main`) -> itself. Anything else raises
    :class:`EvaluateError` naming the path and what was expected.
    """
    from relay.checkpoint.store import STEP_DIR, latest_checkpoint
    from relay.models.paths import PREPARED_MODELS, ModelPathError, resolve_model_path

    if path in PREPARED_MODELS:
        try:
            return resolve_model_path(path), None
        except ModelPathError as exc:
            raise EvaluateError(str(exc)) from None
    target = Path(path).expanduser()
    if not target.exists():
        raise EvaluateError(f"--checkpoint {path}: no such file or directory; {EXPECTED}")
    if not target.is_dir():
        raise EvaluateError(f"--checkpoint {path}: not a directory; {EXPECTED}")
    if _is_model_dir(target):
        step = target.parent
        inside_run = target.name == "hf" and STEP_DIR.match(step.name) and step.parent.name == "checkpoints"
        return target, _run_config(step.parent.parent) if inside_run else None
    if STEP_DIR.match(target.name) and target.parent.name == "checkpoints":
        step = target
    elif (target / "checkpoints").is_dir():
        latest = latest_checkpoint(target)
        if latest is None:
            raise EvaluateError(
                f"--checkpoint {path}: the run has no complete checkpoint yet (looked in {target / 'checkpoints'})"
            )
        step = latest
    else:
        raise EvaluateError(f"--checkpoint {path}: no config.json and no checkpoints/ there; {EXPECTED}")
    hf = step / "hf"
    if not _is_model_dir(hf):
        raise EvaluateError(
            f"--checkpoint {path}: checkpoint {step} has no HF export ({hf / 'config.json'} is missing; "
            "it was saved with trainer.export_hf=false); " + EXPECTED
        )
    return hf, _run_config(step.parent.parent)


def _is_model_dir(path: Path) -> bool:
    from relay.checkpoint.peft_export import is_adapter_dir

    return (path / "config.json").is_file() or is_adapter_dir(path)


def _run_config(run_dir: Path) -> Path | None:
    config = run_dir / "config.yaml"
    return config if config.is_file() else None


def config_overrides(args: argparse.Namespace, model_dir: Path) -> list[str]:
    """The evaluator's defaults, the ``--set`` values, then the model and the flags (which win)."""
    defaults = [f"trainer.val_samples={DEFAULT_SAMPLES}", f"trainer.val_k={DEFAULT_K}"]
    out = [*defaults, *args.overrides, f"model.path={model_dir}"]
    flags = {
        "trainer.val_samples": args.samples,
        "trainer.val_k": args.k,
        "rollout.engine": args.engine,
        "data.max_response_length": args.max_new_tokens,
    }
    out += [f"{key}={value}" for key, value in flags.items() if value is not None]
    return out


def apply_rollout_env(threads: int) -> None:
    """The rollout role's thread and device environment (``roles.env``), unless already set by the user."""
    import torch

    from roles.env import role_env_vars

    device = "gpu" if torch.cuda.is_available() else "cpu"
    for key, value in role_env_vars(threads, device).items():
        os.environ.setdefault(key, value)


def evaluate_model(
    loaded: Any, model_dir: Path, seed: int, progress: bool = True, responses: Path | None = None
) -> dict[str, float]:
    """Generate and grade the validation problems of ``loaded`` (a :class:`relay.config.LoadedConfig`)
    with the model in ``model_dir``; returns the ``val/*`` metrics (plus ``val/seconds``), and writes each
    response with its grade to ``responses`` (JSONL) when given."""
    from driver.timing import PhaseTimer
    from relay.evaluation import response_records, validation_metrics

    timer = PhaseTimer(0)
    with timer.phase(vm.VAL_SECONDS):
        rows, graded = _generate_and_grade(loaded, model_dir, seed, progress)
    if responses is not None:
        responses.parent.mkdir(parents=True, exist_ok=True)
        responses.write_text("".join(json.dumps(r) + "\n" for r in response_records(rows, graded)))
    return {**validation_metrics(rows, graded, loaded.cfg.trainer.val_k), **timer.metrics()}


def _generate_and_grade(loaded: Any, model_dir: Path, seed: int, progress: bool) -> tuple[Any, list[Any]]:
    """The validation rows of :func:`evaluate_model` and the reward role's grades of them (rollout and reward
    role built in this process)."""
    from transformers import AutoTokenizer

    from relay.tasks.prompt_source import validation_prompts

    cfg = loaded.cfg
    prompts = validation_prompts(cfg.data, AutoTokenizer.from_pretrained(str(model_dir)), cfg.trainer.val_samples)
    worker = rollout_worker(loaded, model_dir)
    grader = reward_worker(cfg)
    try:
        return generate_and_grade(worker, grader, prompts, cfg.trainer.val_k, seed, progress)
    finally:
        grader.close()


def rollout_worker(loaded: Any, model_dir: Path) -> Any:
    """The rollout role of ``loaded`` (a :class:`relay.config.LoadedConfig`) on ``model_dir``, in this process (its
    tools too, with ``rollout.agent.enable``; the checkpoint's weights are whole: no adapter)."""
    from driver.role_settings import rollout_worker_settings
    from roles.rollout import RolloutWorker

    apply_rollout_env(loaded.cfg.rollout.resources.threads)
    return RolloutWorker(rollout_worker_settings(loaded, str(model_dir), loaded.cfg.trainer.seed, with_lora=False))


def reward_worker(cfg: Any) -> Any:
    """The reward role of ``cfg``, in this process (its grader processes started); ``close()`` it when done. In
    solver mode the frozen solver is ``reward.solver_model``, else the base policy."""
    from driver.role_settings import reward_worker_settings
    from relay.models.paths import resolve_model_path
    from roles.reward import RewardWorker

    policy = resolve_model_path(cfg.model.path) if cfg.reward.mode == "solver" else cfg.model.path  # solver: its base
    return RewardWorker(reward_worker_settings(cfg, str(policy)))


def generate_and_grade(worker: Any, grader: Any, prompts: Any, k: int, seed: int, progress: bool) -> tuple[Any, list]:
    """``worker``'s greedy response and ``k`` samples per prompt (a tqdm bar on a terminal), and ``grader``'s
    grades of them in chunks: the two inputs of :func:`relay.evaluation.validation_metrics`."""
    from tqdm import tqdm

    from relay.evaluation import grading_chunks
    from relay.run.logs import progress_bar_wanted

    show = progress and progress_bar_wanted()  # no carriage-return bar in a log file
    with tqdm(total=len(prompts), desc="validation", unit="problem", file=sys.stderr, delay=2, disable=not show) as bar:
        rows = worker.evaluate(prompts, k, seed, progress=bar.update)
    return rows, [grader.score(chunk) for chunk in grading_chunks(rows)]


def keep_stdout_for_the_result() -> TextIO:
    """Send everything written to file descriptor 1 (vLLM's and transformers' logs included) to stderr, and
    return a stream on the original stdout: only the JSON line goes there, so ``... | jq`` works."""
    sys.stdout.flush()
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return result


def quiet_terminal() -> Path:
    """File descriptors 1 and 2 (every library's prints and every child process's) and the libraries' loggers to a
    log file; ``sys.stderr`` stays on the terminal for Relay's own lines. Returns the log's path."""
    import tempfile

    from relay.run.logs import redirect_process_output, route_library_logs

    log = Path(tempfile.gettempdir()) / f"relay-evaluate-{os.getpid()}.log"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' loading bars too (read at import)
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    redirect_process_output(log)
    sys.stderr = terminal
    route_library_logs(log)
    print(f"logs: {log} (--verbose shows them here)", file=sys.stderr)
    return log


def _merged_if_adapter(model_dir: Path) -> Path:
    """A PEFT adapter directory -> a temporary HF directory of its base model with it merged (removed at exit)."""
    import atexit
    import shutil

    from relay.checkpoint.peft_export import is_adapter_dir, merge_adapter_dir

    if not is_adapter_dir(model_dir):
        return model_dir
    try:
        merged = merge_adapter_dir(model_dir)
    except (ValueError, KeyError, OSError) as exc:
        raise EvaluateError(f"LoRA adapter {model_dir}: {exc}") from None
    atexit.register(shutil.rmtree, merged, ignore_errors=True)
    print(f"LoRA adapter {model_dir}: merged into its base model in {merged}", file=sys.stderr)
    return merged


def main(argv: list[str] | None = None, result: TextIO | None = None, keep_stdout: bool = False) -> int:
    """The CLI; the JSON line goes to ``result`` (default stdout). ``keep_stdout`` (the command line): once the
    arguments are read (``--help`` and usage errors print as argparse does, to stdout and stderr), file descriptor 1
    goes to stderr and only the JSON line to the original stdout (:func:`keep_stdout_for_the_result`). Returns the
    exit code."""
    args = parse_args(argv)
    if keep_stdout:
        result = keep_stdout_for_the_result()
    result = sys.stdout if result is None else result
    from relay.config import ConfigError, load_config, print_warnings
    from relay.data import DatasetError
    from relay.run.logs import quiet_requested

    try:
        model_dir, run_config = resolve_checkpoint(args.checkpoint)
        model_dir = _merged_if_adapter(model_dir)
        preset = args.config or run_config or DEFAULT_PRESET
        loaded = load_config(preset, config_overrides(args, model_dir))
    except (EvaluateError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_warnings(loaded)
    if quiet_requested(args.verbose):
        quiet_terminal()
    cfg = loaded.cfg
    seed = cfg.trainer.seed if args.seed is None else args.seed
    split = cfg.data.test_path or f"the {cfg.data.task} task's generated test split"
    print(
        f"evaluating {model_dir} ({cfg.rollout.engine}) on {cfg.trainer.val_samples or 'all'} problems of "
        f"{split}, k={cfg.trainer.val_k}, {cfg.data.max_response_length} new tokens "
        f"(settings: {preset})",
        file=sys.stderr,
    )
    try:
        metrics = evaluate_model(loaded, model_dir, seed, responses=Path(args.responses) if args.responses else None)
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2
    line = json.dumps(metrics)
    print(line, file=result, flush=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(keep_stdout=True))
