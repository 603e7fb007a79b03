"""Config loading: precedence, presets, environment, aliases, legacy keys, and errors that name key, value, fix."""

from pathlib import Path

import pytest

from relay.config import ConfigError, load_config, unsupported
from relay.repo import REPO_ROOT
from tests.relay.config.loading import NO_ENV, assert_refused


def test_schema_defaults_validate_and_are_read_only() -> None:
    loaded = load_config(environ=NO_ENV)
    assert loaded.cfg.rollout.batch_size == 8 and loaded.cfg.rollout.n == 4
    with pytest.raises(Exception):  # noqa: B017 - omegaconf's ReadonlyConfigError
        loaded.cfg.rollout.n = 3


def test_precedence_default_preset_env_set(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("rollout:\n  n: 6\n  batch_size: 2\ntrain:\n  micro_batch_size: 4\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nrollout:\n  n: 8\n")
    loaded = load_config(child, ["rollout.temperature=0.7"], environ=NO_ENV)
    cfg = loaded.cfg
    assert (cfg.rollout.n, cfg.rollout.batch_size, cfg.rollout.temperature, cfg.rollout.top_p) == (8, 2, 0.7, 1.0)
    assert loaded.sources["rollout.n"].endswith("child.yaml")
    assert loaded.sources["rollout.batch_size"].endswith("base.yaml")
    env = {"NUM_PRE_Q": "2", "BATCH_SIZE": "4"}
    loaded = load_config(child, ["rollout.batch_size=6"], environ=env)
    assert loaded.cfg.rollout.n == 2 and loaded.sources["rollout.n"] == "env NUM_PRE_Q"  # env beats preset
    assert loaded.cfg.rollout.batch_size == 6 and loaded.sources["rollout.batch_size"] == "--set rollout.batch_size=6"


def test_every_documented_env_var_lands_on_its_key() -> None:
    env = {
        "MODEL_PATH": "/models/x",
        "STEPS": "7",
        "BATCH_SIZE": "6",
        "NUM_PRE_Q": "3",
        "MAX_LENGTH_SAMPLE": "100",
        "GLOBAL_LENGTH": "128",
        "PPO_EPOCHS": "2",
        "BETA": "0.04",
        "TRAIN_MICRO_BATCH_SIZE": "9",
        "LEARNING_RATE": "3e-6",
    }
    cfg = load_config(overrides=["algorithm.old_log_prob_source=actor"], environ=env).cfg
    assert cfg.model.path == "/models/x" and cfg.trainer.total_training_steps == 7
    assert (cfg.rollout.batch_size, cfg.rollout.n, cfg.data.max_response_length) == (6, 3, 100)
    assert cfg.data.min_padded_prompt_length == 128 and cfg.train.ppo_epochs == 2
    assert cfg.algorithm.kl_loss_coef == 0.04 and cfg.train.micro_batch_size == 9
    assert cfg.train.optimizer.lr_schedule.peak_value == 3e-6
    per_device = load_config(environ={"TRAIN_PER_DEVICE_MICRO_BATCH_SIZE": "2"}).cfg
    assert per_device.train.per_device_micro_batch_size == 2


def test_num_pre_q_is_an_alias_of_n() -> None:
    assert load_config(overrides=["rollout.num_pre_q=8"], environ=NO_ENV).cfg.rollout.n == 8
    with pytest.raises(ConfigError, match=r"rollout.n=2 .* and rollout.num_pre_q=8 .* the same setting and disagree"):
        load_config(overrides=["rollout.num_pre_q=8", "rollout.n=2"], environ=NO_ENV)
    assert load_config(overrides=["rollout.num_pre_q=8", "rollout.n=8"], environ=NO_ENV).cfg.rollout.n == 8


def test_the_higher_source_spelling_of_an_alias_wins_and_explain_says_so() -> None:
    """The default preset sets train.micro_batch_size, the user train.per_device_micro_batch_size; --set is
    higher, so it wins (the README's batch-size example, run as written, is in test_docs_commands)."""
    overrides = ["learner.devices_per_host=4", "train.per_device_micro_batch_size=1"]
    loaded = load_config(REPO_ROOT / "configs" / "default.yaml", overrides, environ=NO_ENV)
    assert loaded.cfg.train.micro_batch_size is None and loaded.cfg.train.per_device_micro_batch_size == 1
    assert loaded.derived.micro_batch_size == 4
    line = next(ln for ln in loaded.explain().splitlines() if ln.startswith("train.micro_batch_size:"))
    assert "was 1 (preset configs/default.yaml), replaced by train.per_device_micro_batch_size=1 (--set " in line
    # the environment is above the preset and below --set
    env = load_config(REPO_ROOT / "configs" / "default.yaml", environ={"TRAIN_PER_DEVICE_MICRO_BATCH_SIZE": "2"})
    assert env.cfg.train.micro_batch_size is None and env.derived.micro_batch_size == 2
    back = load_config(
        REPO_ROOT / "configs" / "default.yaml",
        ["train.micro_batch_size=2"],
        environ={"TRAIN_PER_DEVICE_MICRO_BATCH_SIZE": "1"},
    )
    assert back.cfg.train.per_device_micro_batch_size is None and back.derived.micro_batch_size == 2
    # rollout.n in the preset, its alias from --set: the alias wins and both hold its value
    alias = load_config(REPO_ROOT / "configs" / "default.yaml", ["rollout.num_pre_q=2"], environ=NO_ENV)
    assert (alias.cfg.rollout.n, alias.cfg.rollout.num_pre_q) == (2, 2)
    assert "replaced by rollout.num_pre_q=2" in alias.sources["rollout.n"]


def test_two_spellings_in_one_preset_file_are_refused(tmp_path: Path) -> None:
    preset = tmp_path / "both.yaml"
    preset.write_text("train:\n  micro_batch_size: 4\n  per_device_micro_batch_size: 1\n")
    with pytest.raises(ConfigError, match=r"train.micro_batch_size=4 \(preset .*both.yaml\) and "):
        load_config(preset, environ=NO_ENV)
    child = tmp_path / "child.yaml"  # a preset that extends it and picks one spelling still clashes in the base
    child.write_text("extends: both.yaml\n")
    with pytest.raises(ConfigError, match="at the same level"):
        load_config(child, environ=NO_ENV)


def test_every_preset_prints() -> None:
    presets = sorted((REPO_ROOT / "configs").glob("*.yaml"))
    assert {p.stem for p in presets} >= {
        "default",
        "tiny",
        "gsm8k_qwen25_3b_4gpu",
        "gsm8k_qwen25_3b_bs128_steps100",
        "gsm8k_qwen25_7b_tpu_2host",
    }
    for preset in presets:
        text = load_config(preset, environ=NO_ENV).to_yaml()
        assert "derived:" in text and "config_version: 1" in text


def test_4gpu_preset_numbers() -> None:
    loaded = load_config(REPO_ROOT / "configs" / "gsm8k_qwen25_3b_4gpu.yaml", environ=NO_ENV)
    c, d = loaded.cfg, loaded.derived
    assert (c.rollout.batch_size, c.rollout.n, c.data.max_prompt_length, c.data.max_response_length) == (
        30,
        4,
        3072,
        3072,
    )
    assert (c.rollout.gpus_per_replica, c.rollout.gpu_memory_utilization, c.actor_ref.gpus, c.reward.gpus) == (
        1,
        0.4,
        2,
        1,
    )
    assert c.actor_ref.ref_param_offload and c.trainer.save_freq == 25 and c.trainer.test_freq == 50
    assert (d.local_batch, d.local_mini_batch, d.grad_accum_steps, d.optimizer_steps_per_step) == (120, 24, 3, 5)
    assert unsupported(c) == []  # everything in the preset runs (given its GPUs and checkpoint)


def test_explain_names_every_source(tmp_path: Path) -> None:
    loaded = load_config(REPO_ROOT / "configs" / "tiny.yaml", ["rollout.n=2"], environ={"STEPS": "5"})
    text = loaded.explain()
    assert "rollout.n: 2" in text and "# --set rollout.n=2" in text
    assert "trainer.total_training_steps: 5" in text and "# env STEPS" in text
    assert "data.max_response_length: 32" in text and "tiny.yaml" in text
    assert "rollout.top_p: 1.0" in text and "# default" in text
    assert "derived.local_batch: 8" in text


def test_unknown_key_suggests_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown config key 'rollout.temprature'.*did you mean 'rollout.temperature'"
    ):
        load_config(overrides=["rollout.temprature=0.5"], environ=NO_ENV)


def test_unknown_key_in_preset_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  mini_bach_size: 2\n")
    with pytest.raises(
        ConfigError, match=r"'train.mini_bach_size' \(from preset .*bad.yaml\).*'train.mini_batch_size'"
    ):
        load_config(bad, environ=NO_ENV)


def test_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"rollout.n: wrong type .*'abc'"):
        load_config(overrides=["rollout.n=abc"], environ=NO_ENV)
    with pytest.raises(ConfigError, match=r"rollout.batch_size: wrong type \(from env BATCH_SIZE\)"):
        load_config(environ={"BATCH_SIZE": "many"})


@pytest.mark.parametrize(
    ("key", "fix"),
    [
        ("rollout.global_prompt_batch_size", "write rollout.batch_size"),
        ("rollout.prompt_batch_size", "per-process prompts are derived"),
        ("rollout.per_device_batch_size", "write train.per_device_micro_batch_size"),
        ("learner.micro_batch_size", "write train.micro_batch_size"),
    ],
)
def test_legacy_keys_are_refused_with_the_replacement(key: str, fix: str) -> None:
    with pytest.raises(ConfigError, match=rf"'{key}' \(from --set .*\) is no longer a config key: {fix}"):
        load_config(overrides=[f"{key}=4"], environ=NO_ENV)


def test_derived_cannot_be_set() -> None:
    with pytest.raises(ConfigError, match=r"'derived.local_batch' .* is computed"):
        load_config(overrides=["derived.local_batch=4"], environ=NO_ENV)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.n=1", r"rollout.n=1: GRPO needs at least 2"),
        ("rollout.temperature=0", r"rollout.temperature=0.0: must be > 0"),
        ("train.micro_batch_size=3", r"train.micro_batch_size=3 must divide derived.local_batch=32"),
        ("reward.mode=function", r"reward.function is empty but reward.mode=function"),
        ("algorithm.kl_loss_type=k9", r"algorithm.kl_loss_type='k9': must be one of"),
        ("train.ppo_epochs=2", r"2 optimizer steps per training step .* set algorithm.old_log_prob_source=actor"),
        ("rollout.engine=sglang", r"rollout.engine='sglang'"),
        ("rollout.kv_cache_gib=lots", r"rollout.kv_cache_gib=.lots.: must be a number of GiB > 0, .auto."),
        ("model.lora.rank=0", r"model.lora.rank=0: must be >= 1 \(null model.lora = full fine-tuning\)"),
        ("model.lora.target_modules=[qkv]", r"model.lora.target_modules=\['qkv'\]: each must be one of q_proj"),
        ("model.lora.dropout=1.0", r"model.lora.dropout=1.0: must be in \[0, 1\)"),
        ("algorithm.ref_log_prob_source=critic", r"source='critic': must be one of auto, learner, actor_ref"),
        ("model.lora.reference=learner", r"'model.lora.reference' .* no longer a config key: write algorithm.ref_log"),
        ("train.optimizer.name=adam", r"train.optimizer.name='adam': must be one of adamw, lion, sgd"),
        ("data.truncation=middle", r"data.truncation='middle'"),
        ("train.mini_batch_size=3", r"train.mini_batch_size=3 must divide derived.effective_global_prompts=8"),
        ("data.prompt_template=essay", r"data.prompt_template='essay': must be one of concise, plain, question"),
        ("data.task=aime", r"data.task='aime': must be one of gsm8k, math, exact, countdown"),
        ("data.sources.openai/gsm8k=gsm9k", r"data.sources.openai/gsm8k='gsm9k': must be one of gsm8k, math"),
        ("data.user_template=Solve it.", r"data.user_template='Solve it.': has no \{prompt\}"),
        ("data.train_path=null", r"data.train_path is null but data.task=gsm8k reads files"),
        ("data.generate.test_size=0", r"data.generate.test_size=0: must be >= 1"),
        ("reward.grader=judge", r"reward.grader='judge': unknown; choose one of \['countdown', 'exact', 'gsm8k'"),
        ("reward.grader=regex", r"reward.grader_options.pattern: the 'regex' grader needs it"),
        ("reward.grader_options.pattern=x", r"reward.grader_options.pattern: not an option of the 'gsm8k' grader"),
        ("reward.mode=llm", r"reward.mode='llm': must be one of rule, function, solver"),
        ("reward.solver_n=0", r"reward.solver_n=0: must be >= 1"),
        ("reward.solver_n=4", r"reward.solver_n=4 with reward.solver_temperature=0: greedy samples are all the same"),
        ("reward.solver_engine=sglang", r"reward.solver_engine='sglang'"),
        ("reward.solver_top_p=0", r"reward.solver_top_p=0.0: must be in \(0, 1\]"),
        ("reward.solver_prompt_template='Q: {question}'", r"missing field \{guideline\}"),
        ("trainer.role_restart_timeout_s=0", r"trainer.role_restart_timeout_s=0.0: must be > 0"),
        ("reward.solver_prompt_template='{question} {guideline} {hint}'", r"unknown field \{hint\}"),
        ("placement.memory_headroom_gib=-1", r"placement.memory_headroom_gib=-1.0: must be >= 0"),
        ("cluster.gpu_memory_gib=0", r"cluster.gpu_memory_gib=0.0: must be > 0"),
        ("algorithm.filter_groups.metric=seq_reward", r"algorithm.filter_groups.metric='seq_reward': must be one of"),
        ("algorithm.filter_groups.max_extra_passes=-1", r"algorithm.filter_groups.max_extra_passes=-1: must be >= 0"),
        (
            "algorithm.filter_groups.retry_unsolved.temperature=0",
            r"algorithm.filter_groups.retry_unsolved.temperature=0.0: must be > 0",
        ),
        (
            "algorithm.filter_groups.retry_unsolved.enable=true",
            r"retry_unsolved.enable=true with algorithm.filter_groups.enable=False .* set algorithm.filter_groups",
        ),
        ("data.revisit_unsolved.share=0", r"data.revisit_unsolved.share=0.0: must be in \(0, 1\]"),
        ("data.revisit_unsolved.delay=0", r"data.revisit_unsolved.delay=0: must be >= 1"),
        ("data.revisit_unsolved.capacity=-1", r"data.revisit_unsolved.capacity=-1: must be >= 0"),
    ],
)
def test_out_of_range_values_are_refused(override: str, message: str) -> None:
    assert_refused([override], message)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.adv_estimator=gae"], r"algorithm.adv_estimator='gae': must be one of grpo, grpo_mean, rloo, "),
        (
            ["algorithm.adv_estimator=remax", "algorithm.filter_groups.enable=true"],
            r"algorithm.adv_estimator=remax with algorithm.filter_groups.enable=true",
        ),
        (["algorithm.gamma=0"], r"algorithm.gamma=0.0: must be in \(0, 1\]"),
        (["algorithm.policy_loss=ppo2"], r"algorithm.policy_loss='ppo2': must be one of vanilla, gspo, cispo"),
        (["algorithm.policy_loss=gspo", "algorithm.clip_ratio_c=3"], r"the dual clip belongs to the vanilla loss"),
        (["algorithm.policy_loss=gspo", "algorithm.gspo.clip_ratio_low=0"], r"algorithm.gspo.clip_ratio_low=0.0: must"),
        (["algorithm.policy_loss=clip_cov", "algorithm.clip_cov.lb=6"], r"clip_cov.lb=6.0 must be below .*ub=5.0"),
        (
            ["algorithm.policy_loss=kl_cov", "algorithm.kl_cov.ratio=0"],
            r"algorithm.kl_cov.ratio=0.0: must be in \(0, 1\]",
        ),
        (["algorithm.loss_agg_mode=sum"], r"algorithm.loss_agg_mode='sum': must be one of token-mean, token-sum"),
        (["algorithm.kl_loss_type=k2+"], r"algorithm.kl_loss_type='k2\+': must be one of .*k1\+, k3\+, low_var_kl\+"),
        (["algorithm.kl_ctrl.type=adaptive"], r"algorithm.kl_ctrl.type=adaptive with algorithm.use_kl_in_reward=false"),
        (["algorithm.kl_ctrl.type=pid"], r"algorithm.kl_ctrl.type='pid': must be one of fixed, adaptive"),
        (["algorithm.rollout_is=seq"], r"algorithm.rollout_is='seq': must be one of none, tis, seq_tis, seq_geo_tis"),
        (
            ["algorithm.rollout_token_mask.enable=true", "algorithm.rollout_token_mask.high=0.9"],
            r"algorithm.rollout_token_mask: low=0.5, high=0.9: need 0 < low < 1 < high",
        ),
        (
            ["algorithm.rollout_seq_reject.enable=true", "algorithm.rollout_seq_reject.ratio=mean"],
            r"algorithm.rollout_seq_reject.ratio='mean': must be one of geometric, product",
        ),
        (
            ["algorithm.rollout_is=seq_tis", "algorithm.old_log_prob_source=rollout"],
            r"algorithm.rollout_is with algorithm.old_log_prob_source=rollout: .* nothing is corrected",
        ),
    ],
)
def test_algorithm_menu_refusals_name_the_key(overrides: list[str], message: str) -> None:
    assert_refused(overrides, message)


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.adv_estimator=rloo"],
        ["algorithm.adv_estimator=reinforce_plus_plus", "algorithm.gamma=0.99"],
        ["algorithm.adv_estimator=reinforce_plus_plus_baseline"],
        ["algorithm.policy_loss=gspo", "algorithm.loss_agg_mode=seq-mean-token-mean"],
        ["algorithm.policy_loss=cispo", "algorithm.clip_ratio_high=4.0"],
        ["algorithm.policy_loss=geo_mean"],
        ["algorithm.policy_loss=clip_cov"],
        ["algorithm.policy_loss=kl_cov", "algorithm.kl_loss_type=low_var_kl+"],
        ["algorithm.rollout_is=seq_geo_tis", "algorithm.rollout_token_mask.enable=true"],
        ["algorithm.rollout_seq_reject.enable=true", "algorithm.loss_agg_mode=token-sum"],
    ],
)
def test_algorithm_menu_choices_load(overrides: list[str]) -> None:
    load_config(overrides=overrides, environ=NO_ENV)


@pytest.mark.parametrize("lora", [[], ["model.lora.rank=8"]])
def test_the_kl_in_the_reward_takes_its_reference_from_the_actor_ref_role(lora: list[str]) -> None:
    from placement.plan import actor_ref_computes_reference, reference_in_learner

    kl_reward = [*lora, "algorithm.use_kl_in_reward=true"]
    loaded = load_config(overrides=[*kl_reward, "algorithm.ref_log_prob_source=learner"], environ=NO_ENV)
    assert any("ref_log_prob_source=learner with algorithm.use_kl_in_reward=true" in w for w in loaded.warnings)
    assert not reference_in_learner(loaded.cfg) and actor_ref_computes_reference(loaded.cfg)
    for source in ("auto", "actor_ref"):
        loaded = load_config(overrides=[*kl_reward, f"algorithm.ref_log_prob_source={source}"], environ=NO_ENV)
        assert not loaded.warnings and actor_ref_computes_reference(loaded.cfg)


def test_overlong_buffer_must_fit_the_response_budget() -> None:
    on = ["reward.overlong_buffer.enable=true", "data.max_response_length=128"]
    budget = r"reward.overlong_buffer.length=200: must be in \[1, data.max_response_length=128\]"
    with pytest.raises(ConfigError, match=budget):
        load_config(overrides=[*on, "reward.overlong_buffer.length=200"], environ=NO_ENV)
    with pytest.raises(ConfigError, match=r"reward.overlong_buffer.penalty_factor=-0.5: must be >= 0"):
        load_config(overrides=[*on, "reward.overlong_buffer.penalty_factor=-0.5"], environ=NO_ENV)
    load_config(overrides=["reward.overlong_buffer.length=200"], environ=NO_ENV)  # off: not checked


def test_override_syntax_and_missing_preset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(overrides=["rollout.n"], environ=NO_ENV)
    with pytest.raises(
        ConfigError, match=r"--set reward.solver_prompt_template=\{question\} \{guideline\}: .*not a YAML"
    ):
        load_config(overrides=["reward.solver_prompt_template={question} {guideline}"], environ=NO_ENV)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml", environ=NO_ENV)
    loop = tmp_path / "loop.yaml"
    loop.write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="loops back"):
        load_config(loop, environ=NO_ENV)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.max_staleness=-1"], r"trainer.max_staleness=-1: must be >= 0"),
        (
            ["trainer.max_staleness=1", "algorithm.old_log_prob_source=actor"],
            r"trainer.max_staleness=1 with algorithm.old_log_prob_source=actor: .* set algorithm.old_log_prob_source=",
        ),
        (
            ["trainer.max_staleness=2", "rollout.sleep_during_update=true"],
            r"trainer.max_staleness=2 with rollout.sleep_during_update=true",
        ),
        (["learner.resources.cpu_affinity=[-1]"], r"learner.resources.cpu_affinity=\[-1\]: core numbers must be >= 0"),
    ],
)
def test_pipeline_settings_that_cannot_work_are_refused(overrides: list[str], message: str) -> None:
    assert_refused(overrides, message)


def test_a_pipeline_cannot_stop_by_epochs() -> None:
    loaded = load_config(overrides=["trainer.max_staleness=1", "trainer.total_epochs=1"], environ=NO_ENV)
    assert any("trainer.total_training_steps" in problem for problem in unsupported(loaded.cfg))
    assert unsupported(load_config(overrides=["trainer.max_staleness=1"], environ=NO_ENV).cfg) == []


def test_relay_spellings_win_and_every_applied_override_is_listed() -> None:
    """Each runner-script name also reads with the RELAY_ prefix; with both set the prefixed one wins, and the
    loaded config lists what was applied (the run header prints it, the manifest records it)."""
    env = {"STEPS": "5", "RELAY_STEPS": "7", "RELAY_BETA": "0.2", "UNRELATED": "1"}
    loaded = load_config(environ=env)
    assert loaded.cfg.trainer.total_training_steps == 7 and loaded.cfg.algorithm.kl_loss_coef == 0.2
    assert loaded.sources["trainer.total_training_steps"] == "env RELAY_STEPS"
    described = [o.describe() for o in loaded.env_overrides]
    assert described == [
        "RELAY_STEPS=7 -> trainer.total_training_steps (STEPS ignored: the RELAY_ spelling wins)",
        "RELAY_BETA=0.2 -> algorithm.kl_loss_coef",
    ]
    with_set = load_config(None, ["trainer.total_training_steps=9"], env)
    assert with_set.cfg.trainer.total_training_steps == 9  # --set beats the environment
    assert load_config(environ=NO_ENV).env_overrides == []


def test_revisiting_unsolved_prompts_in_a_warm_start_is_refused() -> None:
    """A warm start samples and grades nothing, so nothing would ever be queued."""
    assert_refused(
        ["sft.enable=true", "rollout.n=1", "data.revisit_unsolved.enable=true"],
        r"data.revisit_unsolved.enable=true with sft.enable=true: a warm start grades nothing",
    )
