"""Bad reward_model and reward.sources settings are refused by the config's validation, before Ray starts, naming
the key."""

from __future__ import annotations

import pytest

from relay.config import ConfigError, load_config
from relay.models.tiny import build_tiny_classifier

SOURCES = "reward.sources=[{source: reward, weight: 1.0}, {source: reward_model, weight: 0.5, normalize: batch}]"


JUDGE = ["reward_model.enable=true", "reward_model.kind=judge", "reward_model.path=TINY_LM", SOURCES]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return build_tiny_classifier("llama", tmp_path_factory.mktemp("rm"))


def test_a_classifier_with_its_source_loads(classifier_dir) -> None:
    cfg = load_config(None, ["reward_model.enable=true", f"reward_model.path={classifier_dir}", SOURCES]).cfg
    assert [s.source for s in cfg.reward.sources] == ["reward", "reward_model"]


def test_a_judge_with_its_rubric_loads(tiny_model_dir) -> None:
    overrides = [o.replace("=TINY_LM", f"={tiny_model_dir}") for o in JUDGE]
    cfg = load_config(None, [*overrides, "reward_model.judge.rubric='Is {response} right for {question}?'"]).cfg
    assert cfg.reward_model.kind == "judge" and cfg.reward_model.judge.score == "yes_probability"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["reward_model.enable=true", SOURCES], "reward_model.path is empty"),
        (["reward_model.enable=true", "reward_model.path=/nonexistent", SOURCES], "no config.json there"),
        (["reward_model.enable=true", "reward_model.path=TINY_LM", SOURCES], "not a *ForSequenceClassification"),
        (["reward_model.enable=true", "reward_model.path=RM"], "does not name it"),
        ([SOURCES], "reward_model.enable is false"),
        (["reward.sources=[{source: reward, weight: 0.0}]"], "sum to nothing"),
        (["reward_model.enable=true", "reward_model.path=RM", "reward_model.kind=rm", SOURCES], "reward_model.kind"),
        ([*JUDGE, "reward_model.path=RM"], "not a *ForCausalLM"),
        ([*JUDGE, "reward_model.judge.rubric='Grade {question}'"], "no {response} placeholder"),
        ([*JUDGE, "reward_model.judge.rubric='{response} vs {answer}'"], "unknown placeholder(s) ['answer']"),
        ([*JUDGE, "reward_model.judge.yes='Absolutely yes'"], "reward_model.judge.yes='Absolutely yes' is"),
        ([*JUDGE, "reward_model.judge.score=grade"], "reward_model.judge.score"),
        ([*JUDGE, "reward_model.engine=sglang"], "reward_model.engine"),
        ([*JUDGE, "reward_model.judge.score=number", "reward_model.judge.number_max=0"], "judge.number_max=0"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides, message, classifier_dir, tiny_model_dir) -> None:
    paths = {"TINY_LM": str(tiny_model_dir), "RM": str(classifier_dir)}
    overrides = [o.replace("=TINY_LM", f"={paths['TINY_LM']}").replace("=RM", f"={paths['RM']}") for o in overrides]
    with pytest.raises(ConfigError) as caught:
        load_config(None, overrides)
    assert message in str(caught.value), str(caught.value)


def test_the_judge_preset_resolves_its_prepared_judge_by_name() -> None:
    """``reward_model.path: smollm2-135m`` resolves as ``model.path`` does (the checkpoint scripts/setup.sh made),
    and SmolLM2's "Yes" and "No" are one token each."""
    from relay.models.paths import reward_model_dir
    from relay.repo import CONFIGS_DIR

    cfg = load_config(CONFIGS_DIR / "arithmetic_smollm2_judge.yaml", []).cfg
    assert (reward_model_dir(cfg) / "config.json").is_file() and cfg.reward_model.kind == "judge"
    assert [s.source for s in cfg.reward.sources] == ["reward_model"]
