"""Session fixtures: one tiny model checkpoint and one local Ray instance for the whole run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay.repo import JAX_CACHE_MAX_BYTES, REPO_ROOT, relay_home

# Every XLA program the tests compile, in this process, its subprocesses and the Ray roles they start (which inherit
# this environment), goes to the persistent compilation cache the roles already use ($RELAY_HOME/jax-cache), however
# short its compile (JAX caches only compiles over 1 s by default). The tests compile the same tiny-model programs
# many times over: test_learner_matrix.py's Llama half took 87 s without the cache, 61 s with it empty (programs its
# cases share) and 24 s with it filled (AMD EPYC, 2 cores, alone).
# The roles' bound (JAX_CACHE_MAX_BYTES) also locks each entry's read and write: both test workers and their roles
# share the directory.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(relay_home() / "jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(JAX_CACHE_MAX_BYTES))

# Every Ray the tests start (the session's ``ray.init``, the isolated ``ray start`` heads, a trainer's own local Ray)
# inherits these: Ray's own housekeeping at a test suite's pace instead of a dashboard user's. Nothing here reads the
# dashboard agent's node and worker stats, which it otherwise gathers every 5 s for every worker process (Ray 2.60,
# dashboard/modules/reporter/reporter_consts.py), nor the dashboard head's metrics record (dashboard/consts.py, 5 s).
# The log monitor globs the session's log directory every 0.1 s while it holds under 1,000 files, every 0.5 s above
# (_private/log_monitor.py, RAY_LOG_MONITOR_MANY_FILES_THRESHOLD): a threshold of 0 keeps it at 0.5 s. Idle with four
# actors, a head's log monitor and agent took 1.3 CPU-s a minute before and 0.75 after (AMD EPYC, 2 cores).
os.environ.setdefault("REPORTER_UPDATE_INTERVAL_MS", "60000")
os.environ.setdefault("METRICS_RECORD_INTERVAL_S", "60")
os.environ.setdefault("RAY_LOG_MONITOR_MANY_FILES_THRESHOLD", "0")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-64 random Llama (tied embeddings) with the SmolLM2 tokenizer."""
    from relay.models.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_untied_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from relay.models.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama-untied"), tie_word_embeddings=False, seed=1)


@pytest.fixture(scope="session")
def tiny_sharded_qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tied tiny Qwen2 in the Qwen2.5 checkpoints' on-disk layout: bfloat16 weights in two safetensors shards
    named by ``model.safetensors.index.json``."""
    from relay.models.tiny import TINY_SHARD_SIZE, build_tiny_qwen2

    return build_tiny_qwen2(
        tmp_path_factory.mktemp("tiny-qwen2-sharded-bf16"), dtype="bfloat16", max_shard_size=TINY_SHARD_SIZE, seed=4
    )


@pytest.fixture(scope="session")
def tiny_qwen2_float32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny Qwen2 (same seed) as :func:`tiny_sharded_qwen2_dir`, saved float32 in one file."""
    from relay.models.tiny import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2-float32"), seed=4)


@pytest.fixture
def environ_restored():
    """``os.environ`` as it was before the test: for a test that builds a role in this process through the
    command-line path (``driver.evaluate.rollout_worker`` sets the role's thread and device variables, such as an
    empty ``CUDA_VISIBLE_DEVICES``, for the process it is in), so later tests on the worker, and what they start,
    do not inherit them."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def preset_run(request, ray_session, tmp_path_factory):
    """``preset_run(name)``: a preset's two-step tiny run (:func:`tests.presets.preset_runner`), once per module."""
    from tests.presets import preset_runner

    return preset_runner(request, tmp_path_factory)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with this machine's real CPU count, shared by every test that needs Ray."""
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
    )
    yield ray
    ray.shutdown()


# What the tool-calling tiny models were taught to answer every prompt with: a tool call, its result, an answer.
TOOL_CALLING_ANSWER = "<tool_call>calculator: 2 + 3</tool_call><tool_result>5</tool_result> #### 5"
PYTHON_CALLING_ANSWER = (
    "<tool_call>python: import time; time.sleep(2); print(5)</tool_call><tool_result>5</tool_result> #### 5"
)


def build_answer_model(base_dir: Path, out: Path, answer: str, steps: int = 200) -> Path:
    """The tiny model at ``base_dir`` fine-tuned (a few seconds of supervised steps) to answer GSM8K prompts under
    the ``tools`` template with ``answer``: a real model whose samples call a tool, so the agent loop, the tools
    role and their metrics run on real engines. Sampled at temperature 1 it mostly repeats the answer and sometimes
    strays (a malformed call, no call): both paths are seen."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from relay.data.gsm8k import build_messages, load_gsm8k

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(base_dir)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    questions = [ex.question for ex in load_gsm8k(REPO_ROOT / "data" / "gsm8k" / "train.jsonl")[:16]]
    target = tok.encode(answer, add_special_tokens=False) + [tok.eos_token_id]
    prompts = [
        tok.encode(
            tok.apply_chat_template(build_messages(q, "tools"), add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )
        for q in questions
    ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        prompt = prompts[step % len(prompts)]
        hidden = model.model(input_ids=torch.tensor([prompt + target])).last_hidden_state
        logits = model.lm_head(hidden[0, len(prompt) - 1 : -1])  # the answer's positions only: the head is the cost
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(target))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval().save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tool_calling_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught :data:`TOOL_CALLING_ANSWER` (a calculator call)."""
    return build_answer_model(tiny_model_dir, tmp_path_factory.mktemp("tiny-llama-calculator"), TOOL_CALLING_ANSWER)


# The parallel run (`-n 2 --dist loadscope --no-loadscope-reorder`: a module is one unit of work, on one worker, its
# module fixtures made once) hands modules out in collection order. These are the longest, in seconds, from the
# "longest modules" table of a clean-clone run of .ci/run on a 2-core AMD EPYC (family 25, AVX-512) with both workers
# busy and the JAX cache filled, 2026-12-03 (29.3 minutes, 3,450 worker-seconds); they go first, longest first, so the
# two workers end together instead of one finishing a long module alone.
LONGEST_MODULES = {
    "tests/test_docs_commands.py": 465,
    "tests/benchmarks/faults/test_chaos.py": 334,  # the campaign, two mutations and a SIGTERM against its reference
    "tests/test_two_nodes.py": 330,  # the 2-host preset, the baseline and the lost node on one cluster
    "tests/test_presets.py": 170,
    "tests/test_trainer_resume.py": 132,
    "tests/roles/test_learning.py": 116,
    "tests/test_trainer_agent.py": 104,
    "tests/test_model_families_run.py": 98,
    "tests/driver/test_pipeline.py": 80,
    "tests/driver/test_recovery.py": 78,
    "tests/roles/test_rollout_agent.py": 78,
    "tests/test_presets_qwen.py": 70,
    "tests/test_trainer_cli.py": 68,
    "tests/test_job_submit.py": 65,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def cost(item: pytest.Item) -> int:
        return -LONGEST_MODULES.get(str(item.path.relative_to(REPO_ROOT)), 0)

    items.sort(key=cost)  # stable: every module's own order is kept


class ModuleDurations:
    """Each test module's seconds (setup, call and teardown of its tests, on whichever worker ran it), kept by the
    process that reports (pytest-xdist's controller in the parallel run). At the end of a run the longest are printed
    under "longest modules" and the whole table, with the 100 longest tests, is written to
    ``$RELAY_HOME/test-durations/<UTC time>.json``, so a run CI made on this machine can be read afterwards to
    re-measure :data:`LONGEST_MODULES` and the suite's budget."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.test_seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = report.nodeid.split("::", 1)[0]
        self.seconds[module] = self.seconds.get(module, 0.0) + float(report.duration)
        self.test_seconds[report.nodeid] = self.test_seconds.get(report.nodeid, 0.0) + float(report.duration)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if not self.seconds:
            return
        import json
        import time

        ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        total = sum(self.seconds.values())
        terminalreporter.write_sep("-", f"longest modules (of {len(ranked)}, {total:.0f} s in all)")
        for module, seconds in ranked[:15]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
        out = relay_home() / "test-durations"
        out.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        tests = dict(sorted(self.test_seconds.items(), key=lambda kv: -kv[1])[:100])  # setup counts for its first test
        record = {"exit_status": int(exitstatus), "args": list(config.invocation_params.args), "modules": dict(ranked)}
        record["longest_tests"] = tests
        (out / f"{stamp}.json").write_text(json.dumps(record, indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker's reports reach the controller, which keeps the table
        config.pluginmanager.register(ModuleDurations(), "relay-module-durations")
