"""The commands in README.md and docs/*.md run as written, so the docs cannot rot.

Every ``python …`` line of a fenced shell block is either run here (with its placeholders filled: a tiny run
for ``outputs/<run>``, the tiny model for ``/path/to/hf-model``), part of a recipe, or matched by a rule in
``NOT_RUN`` that says why it cannot run on this machine and which test covers it instead. A new command that is none
of these fails the test.

A recipe is a fenced bash block under a ``<!-- recipe: NAME -->`` line: a task end to end (train, evaluate, export;
LoRA, PEFT, merge; ...). Each runs whole, as written, with ``bash -e`` in a scratch directory that holds the
checkout's entry points, configs and data, in document order (a later recipe may read an earlier one's run), with
only the environment changed: the ``RELAY_`` variables of :data:`TINY_RUN` shrink every run to the tiny model and a
few short steps, and every trainer joins one Ray head started for them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from relay.repo import REPO_ROOT
from tests.tiny_runs import metric_rows

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?:bash|sh|shell|console)?\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?python ")

# (pattern, why it is not run here)
NOT_RUN: tuple[tuple[str, str], ...] = (
    (r"\[--", "a usage synopsis, not a command (its forms are run below)"),
    (r"<preset>|<head-ip>", "a placeholder for the user's own preset or cluster"),
    (r"--resume ", "trains: resuming is tests/test_trainer_resume.py"),
    (r"^python trainer\.py --config configs/gsm8k_smollm2_solver\.yaml$", "trains: tests/test_trainer_solver.py"),
    (r"^python trainer\.py --config configs/gsm8k_smollm2_tools\.yaml$", "trains: tests/test_trainer_agent.py"),
    (r"--set rollout\.replicas=2", "trains two engines: tests/roles/test_rollout_replicas.py"),
    (r"-m benchmarks\.", "a benchmark (minutes to hours): its results are in BENCHMARKS.md"),
    (r"^python submit\.py ", "submits a job to a running Ray head: tests/test_job_submit.py"),
    (r"^python -m driver\.evaluate --checkpoint outputs/<run>", "vLLM on a run: test_evaluate_on_a_run (slow)"),
    (r"placement\.on_cpu=true\s+--set model\.path=", "trains a preset on the CPU: tests/test_presets.py"),
    (r"relay\.checkpoint\.export .*--merge", "merges a LoRA run's adapter: the lora recipe below runs it"),
)


def doc_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every python command in a fenced shell block, continuations joined."""
    out = []
    for path in DOCS:
        for block in FENCE.findall(path.read_text()):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip()
                if COMMAND.match(line):
                    out.append((path.name, re.sub(r"\s+#.*$", "", line).strip()))
    return out


def _why_not_run(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN if re.search(pattern, command)), None)


def _run(command: str, **fill: str) -> subprocess.CompletedProcess:
    for placeholder, value in fill.items():
        command = command.replace(placeholder, value)
    argv = shlex.split(command)
    argv[0] = sys.executable  # python / .venv/bin/python
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


RECIPE = re.compile(r"^<!-- recipe: ([\w-]+) -->\n```(?:bash|sh)\n(.*?)^```", re.S | re.M)


def recipes() -> dict[str, tuple[str, str]]:
    """``{name: (file, block)}`` of every recipe, in document order (README first, then docs/ by name)."""
    found: dict[str, tuple[str, str]] = {}
    for path in DOCS:
        for name, block in RECIPE.findall(path.read_text()):
            assert name not in found, f"two recipes named {name}"
            found[name] = (path.name, block)
    return found


RECIPE_COMMANDS = {re.sub(r"\s+#.*$", "", ln).strip() for _, block in recipes().values() for ln in block.splitlines()}
RUNNABLE = [(f, c) for f, c in doc_commands() if _why_not_run(c) is None and c not in RECIPE_COMMANDS]


def test_every_command_is_run_or_says_why_not() -> None:
    commands = doc_commands()
    assert len(commands) >= 15, commands  # the extraction finds the README's commands
    runnable = {c for _, c in RUNNABLE}
    assert any("--print-plan" in c for c in runnable) and any("--print-config" in c for c in runnable)
    assert any("relay.run.summarize" in c for c in runnable) and any("driver.evaluate" in c for c in runnable)


@pytest.mark.parametrize(
    "command",
    [c for _, c in RUNNABLE if "outputs/<run>" not in c and "driver.evaluate" not in c],
)
def test_config_and_plan_commands_run_as_written(command: str) -> None:
    result = _run(command)
    assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr
    if "--print-config" in command:
        assert "derived:" in result.stdout
    if "train.per_device_micro_batch_size=1" in command:  # the README's worked batch-size example
        derived = result.stdout.split("derived:", 1)[1]
        assert "micro_batch_size: 4" in derived and "grad_accum_steps: 4" in derived
    if "--print-plan" in command:
        assert "fits: yes" in result.stdout


def check_commands_on_a_run(run_dir: Path, model_dir: Path, scratch: Path) -> None:
    """``relay.run.summarize outputs/<run>`` and ``relay.checkpoint.export outputs/<run>`` on a real tiny run (its
    final checkpoint), and the HF-engine evaluation of a model directory (the tiny model for ``/path/to/hf-model``),
    each as the docs write it; the run is the train-evaluate-export recipe's (trained once, read here)."""
    runs_here = ("relay.run.summarize", "driver.evaluate", "relay.checkpoint.export")
    commands = [c for _, c in RUNNABLE if any(m in c for m in runs_here)]
    assert commands
    fill = {"outputs/<run>": str(run_dir), "exported/<run>": str(scratch / "exported-again")}
    fill["/path/to/hf-model"] = str(model_dir)
    for command in commands:
        result = _run(command, **fill)
        assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
        if "summarize" in command:
            assert "| step |" in result.stdout and (run_dir / "plots" / "reward.png").is_file()
        elif "relay.checkpoint.export" in command:
            out = Path(result.stdout.split("model: ", 1)[1].strip())  # prints "model: <the --out directory>"
            assert out.parent == scratch and (out / "config.json").is_file() and (out / "model.safetensors").is_file()
        else:
            assert '"val/problems": 20.0' in result.stdout and '"val/format_rate_greedy"' in result.stdout


@pytest.mark.slow
def test_evaluate_on_a_run(ray_session, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The README's ``driver.evaluate --checkpoint outputs/<run>…`` lines (vLLM, the run's own config)."""
    from relay.config import load_config
    from trainer import train

    run_dir = tmp_path / "tiny-run"
    overrides = [
        f"model.path={tiny_model_dir}",
        "trainer.total_training_steps=1",
        "trainer.save_freq=1",
        f"trainer.output_dir={tmp_path}",
        "trainer.val_samples=4",
    ]
    assert train(load_config(REPO_ROOT / "configs" / "tiny.yaml", overrides, environ={}), tiny_model_dir, run_dir) == 0
    for _, command in doc_commands():
        if command.startswith("python -m driver.evaluate --checkpoint outputs/<run>"):
            result = _run(command, **{"outputs/<run>": str(run_dir), "step_000020": "step_000001"})
            assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
            assert '"val/accuracy_greedy"' in result.stdout


# What every recipe runs with instead of SmolLM2 and the presets' lengths (the tiny model is set per session); 48
# new tokens hold the tools preset's 48-token overlong buffer. The recipes show the commands, not an engine: their
# trainers sample on the HF engine, whose start costs ~17 CPU-seconds less than vLLM's a run on 2 cores (vLLM's
# trainer runs: tests/test_presets.py, tests/test_model_families_run.py, tests/test_trainer_resume.py).
TINY_RUN = {
    "RELAY_STEPS": "2",
    "RELAY_BATCH_SIZE": "4",
    "RELAY_MAX_LENGTH_SAMPLE": "48",
    "RELAY_ROLLOUT_ENGINE": "hf",
}
# What each recipe must have left behind, besides its exit code 0 (paths relative to its scratch directory).
RECIPE_OUTPUTS = {
    "train-evaluate-export": ["outputs/first-run/metrics.jsonl", "exported/first-run/config.json"],
    "lora": ["exported/lora-adapter/adapter_config.json", "exported/lora-merged/model.safetensors"],
    "algorithm": ["outputs/rloo-cispo/plots/reward.png"],
    "resume": ["outputs/resumable/checkpoints/step_000004"],
    "submit": ["outputs/submitted/metrics.jsonl"],
    "own-data": ["outputs/my-math/eval.json"],
    "countdown": ["outputs/countdown-run/plots/reward.png"],
    "arithmetic": ["outputs/arithmetic/eval.json"],
    "warm-start": ["exported/warm-start/config.json", "outputs/tools-after-warm-start/metrics.jsonl"],
    "worked-sums": ["exported/worked-sums/config.json", "outputs/arithmetic-after-worked-sums/metrics.jsonl"],
    "learning-eval": ["outputs/learn-run/eval.json"],
    "reward-model-classifier": ["reward-model/config.json", "outputs/with-reward-model/metrics.jsonl"],
    "reward-model-judge": ["judge-model/config.json", "outputs/with-judge/metrics.jsonl"],
}
ENTRY_POINTS = ("trainer.py", "submit.py", "configs", "data")


@pytest.fixture(scope="module")
def recipe_head(tiny_model_dir: Path, request: pytest.FixtureRequest):
    """One Ray head for every recipe, started with the tiny-run variables (a submitted job runs with the head's
    environment, not the submitting shell's). Its dashboard, which ``submit.py`` talks to, only when a recipe this
    session runs submits a job: the others' trainers join by the GCS address."""
    import os

    from benchmarks.harness.ray_head import isolated_head

    tiny = {**TINY_RUN, "RELAY_MODEL_PATH": str(tiny_model_dir), "BASE_MODEL": str(tiny_model_dir)}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    selected = [i.callspec.params["name"] for i in request.session.items if i.originalname == RECIPE_TEST]
    submits = any("submit.py" in recipes()[name][1] for name in selected)
    with isolated_head(env={**tiny, "PATH": path, "PYTHONPATH": str(REPO_ROOT)}, dashboard=submits) as head:
        yield head


def test_every_recipe_has_its_checks() -> None:
    assert list(recipes()) == list(RECIPE_OUTPUTS), "a recipe without its expected outputs here, or one gone"


# Recipes whose every command is run by the default test run elsewhere, the same way: in the slow run here.
COVERED_ELSEWHERE = {
    "resume": (
        "`trainer.py --resume <run dir>` after a stop: tests/benchmarks/faults/test_chaos.py, tests/test_two_nodes.py"
    ),
    "submit": "`submit.py -- python trainer.py` against a head: tests/test_job_submit.py",
    # ~110 s of the default run (Intel Xeon, 2 cores): a preset's tiny run, then an evaluation of 200 problems; the
    # preset's tiny run is tests/test_presets.py's, `driver.evaluate --checkpoint ... --out` the own-data recipe's
    "arithmetic": "`trainer.py --config configs/arithmetic_smollm2.yaml`: tests/test_presets.py; evaluate: own-data",
    # ~130 s (AMD EPYC, 2 cores, empty JAX cache): the learning preset's tiny run (tests/test_presets.py's), then 200
    # problems evaluated with the preset's --config (`driver.evaluate --config`: tests/driver/test_evaluate_cli.py)
    "learning-eval": "`trainer.py --config configs/gsm8k_smollm2_learn.yaml`: tests/test_presets.py; evaluate: above",
    # the worked-sums warm start's tiny run is tests/test_presets.py's; a warm start exported, then a preset trained
    # from the export with --set model.path: the warm-start recipe above, in the default run
    "worked-sums": "`configs/sft_arithmetic_worked.yaml`: tests/test_presets.py; export: warm-start recipe",
}


def recipe_params() -> list:
    """Every recipe's name; those in :data:`COVERED_ELSEWHERE` marked slow."""
    return [pytest.param(n, marks=[pytest.mark.slow] if n in COVERED_ELSEWHERE else []) for n in recipes()]


RECIPE_TEST = "test_recipe_runs_as_written"


@pytest.mark.parametrize("name", recipe_params())
def test_recipe_runs_as_written(name: str, recipe_head, tmp_path: Path) -> None:
    """The recipe's block, whole, in a fresh directory holding the checkout's entry points: trainers join the test
    head (RAY_ADDRESS, its GCS), ``submit.py`` reads the head's dashboard from RAY_ADDRESS as ``ray job`` does."""
    doc, block = recipes()[name]
    for entry in ENTRY_POINTS:
        (tmp_path / entry).symlink_to(REPO_ROOT / entry)
    env = recipe_head.driver_env
    if "submit.py" in block:
        env = {**env, "RAY_ADDRESS": recipe_head.url}
    result = subprocess.run(
        ["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    logs = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, f"{doc} recipe {name}:\n{block}\n{logs}"
    assert "Traceback" not in result.stderr, logs
    for output in RECIPE_OUTPUTS[name]:
        assert (tmp_path / output).exists(), f"{doc} recipe {name} left no {output}:\n{logs}"
    for written in (tmp_path / "outputs").glob("*/metrics.jsonl"):  # every key each run wrote is catalogued
        metric_rows(written.parent)
    if name.startswith("reward-model-"):  # the reward model scored every step and its source was weighed in
        run = "with-reward-model" if name == "reward-model-classifier" else "with-judge"
        rows = list(metric_rows(tmp_path / "outputs" / run).values())
        keys = ("reward_model/score_std", "reward/source_reward_model_mean")
        assert rows and all(k in r for r in rows for k in keys), rows
        assert any(r["reward_model/score_std"] > 0 for r in rows), rows
        judged = [r.get("reward_model/judge_parse_failures") for r in rows]
        assert judged == ([0.0] * len(rows) if name == "reward-model-judge" else [None] * len(rows)), judged
    if name == "train-evaluate-export":  # the environment's settings are said and recorded, not silent
        said = f"environment overrides: RELAY_MODEL_PATH={recipe_head.env['RELAY_MODEL_PATH']} -> model.path"
        assert said in result.stdout + result.stderr, logs
        manifest = json.loads((tmp_path / "outputs" / "first-run" / "manifest.json").read_text())
        recorded = {o["var"]: (o["key"], o["value"]) for o in manifest["env_overrides"]}
        assert recorded["RELAY_STEPS"] == ("trainer.total_training_steps", "2"), recorded
        assert recorded["RELAY_ROLLOUT_ENGINE"] == ("rollout.engine", "hf"), recorded
        # the docs' summarize, export and evaluate commands, on the run this recipe left
        check_commands_on_a_run(tmp_path / "outputs" / "first-run", Path(recipe_head.env["RELAY_MODEL_PATH"]), tmp_path)
