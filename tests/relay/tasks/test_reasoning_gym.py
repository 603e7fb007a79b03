"""relay.tasks.reasoning_gym: reasoning-gym's generators as a task: splits that share no problem, the recipe in the
manifest, per-dataset rows, and the config refusals that name the key (before anything starts)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from relay.config.data_schema import DataConfig
from relay.data.gsm8k import DatasetError
from relay.repo import REPO_ROOT
from relay.tasks.problem_key import problem_key
from relay.tasks.reasoning_gym import check_options, dataset_specs, generate_reasoning_gym, seed_streams
from relay.tasks.run_tasks import RunTasks
from tests.relay.config.loading import refusal_lines

pytest.importorskip("reasoning_gym")

ONE_DIGIT_SUMS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1, "operators": ["+"]}


def _data(datasets: list[dict], **generate: object):
    recipe = {"seed": 1, "test_seed": 1_000_000, "train_size": 600, "test_size": 100, **generate}
    return OmegaConf.merge(
        OmegaConf.structured(DataConfig),
        {"task": "reasoning_gym", "train_path": None, "test_path": None, "generate": {**recipe, "options": {}}},
        {"generate": {"options": {"datasets": datasets}}},
    )


def test_no_validation_question_reaches_training_and_the_drop_is_logged(capsys: pytest.CaptureFixture) -> None:
    """One-digit sums have a few hundred questions, so 600 training rows repeat many of the 100 validation ones
    by chance: every one is dropped from training, and the count is on stderr."""
    tasks = RunTasks.from_config(_data([{"name": "basic_arithmetic", "config": ONE_DIGIT_SUMS}]))
    test, train = tasks.read(None, "test"), tasks.read(None, "train")
    assert len(test) == 100 and not {e.question for e in test} & {e.question for e in train}
    dropped = 600 - len(train)
    assert dropped > 0
    assert f"data: {dropped} of 600 generated training problems dropped" in capsys.readouterr().err
    assert test[0].uid == "rg-1000000-0" and train[0].uid.startswith("rg-1-")
    assert {e.subset for e in test} == {"basic_arithmetic"}
    assert tasks.read(None, "test") == test  # the same rows in every run


# the arithmetic preset's sums, as the preset sets them
ARITHMETIC_PRESET_SUMS = OmegaConf.to_container(
    OmegaConf.load(REPO_ROOT / "configs" / "arithmetic_smollm2.yaml").data.generate.options.datasets[0].config
)


def test_the_validation_split_is_distinct_problems_none_of_which_trains_even_reordered() -> None:
    """The arithmetic preset's sums: 200 validation rows as drawn repeat questions (one-digit sums are a small
    space); the distinct split holds 200 different problems, and no training row is one of them with its terms
    reordered."""
    data = _data([{"name": "basic_arithmetic", "config": ARITHMETIC_PRESET_SUMS}], test_seed=1_000_001, test_size=200)
    test, train = RunTasks.from_config(data).read(None, "test"), RunTasks.from_config(data).read(None, "train")
    keys = {problem_key(e.question) for e in test}
    assert len(test) == len(keys) == 200
    assert not keys & {problem_key(e.question) for e in train}
    as_drawn = RunTasks.from_config(OmegaConf.merge(data, {"generate": {"distinct_test": False}})).read(None, "test")
    assert len(as_drawn) == 200 and len({problem_key(e.question) for e in as_drawn}) < 200
    assert as_drawn[0] == test[0]  # the distinct split is the stream with its repeats skipped


def test_a_space_with_fewer_distinct_problems_than_the_split_is_refused_naming_the_key() -> None:
    one_digit = {**ARITHMETIC_PRESET_SUMS, "max_digits": 1}  # 55 sums up to the order of their terms
    tasks = RunTasks.from_config(_data([{"name": "basic_arithmetic", "config": one_digit}], test_size=100))
    with pytest.raises(DatasetError, match=r"data.generate.test_size=100: .* gave only \d+ distinct problems"):
        tasks.read(None, "test")


def test_rows_do_not_depend_on_the_count_and_carry_the_item() -> None:
    specs = {"datasets": [{"name": "chain_sum", "config": {"min_terms": 3, "max_terms": 3}}]}
    short, longer = generate_reasoning_gym(3, 7, specs), generate_reasoning_gym(10, 7, specs)
    assert longer[:3] == short
    row = short[0]
    assert set(row) == {"uid", "question", "answer", "dataset"} and row["dataset"] == "chain_sum"
    from relay.scoring.reasoning_gym import answer_of, decode_ground_truth

    assert decode_ground_truth(row["answer"])["metadata"]["num_terms"] == 3
    assert answer_of(row["answer"]) == str(eval(row["question"].rsplit(":", 1)[1].rstrip(" =")))  # noqa: S307


def test_a_mix_draws_each_dataset_and_reports_it_as_a_subset() -> None:
    datasets = [
        {"name": "basic_arithmetic", "weight": 1, "config": ONE_DIGIT_SUMS},
        {"name": "chain_sum", "weight": 1, "config": {"min_terms": 3, "max_terms": 3}},
    ]
    test = RunTasks.from_config(_data(datasets)).read(None, "test")
    counts = {name: sum(e.subset == name for e in test) for name in ("basic_arithmetic", "chain_sum")}
    assert sum(counts.values()) == 100 and min(counts.values()) > 25


def test_the_recipe_and_the_package_version_are_in_the_manifest() -> None:
    import importlib.metadata

    from relay.run.manifest import split_fingerprints

    data = _data([{"name": "basic_arithmetic", "config": ONE_DIGIT_SUMS}])
    train, test = split_fingerprints(OmegaConf.to_container(data))
    assert (train["generated"], train["seed"], test["test_seed"]) == ("reasoning_gym", 1, 1_000_000)
    assert train["options"]["datasets"][0]["config"]["max_digits"] == 1
    assert train["package"] == f"reasoning-gym=={importlib.metadata.version('reasoning-gym')}"


def test_datasets_as_a_mapping_by_name() -> None:
    """``datasets.<name>: {weight, config}`` (what ``--set`` reaches) is the same recipe as the list."""
    as_map = dataset_specs({"datasets": {"chain_sum": {"config": {"max_terms": 3}}}})
    assert as_map == [{"name": "chain_sum", "weight": 1, "config": {"max_terms": 3}}]


def test_seed_streams_golden() -> None:
    assert seed_streams(0, 200, 1) == range(0, 200)
    assert seed_streams(0, 200, 2) == range(0, 202)


@pytest.mark.parametrize(
    ("datasets", "generate", "expected"),
    [
        (
            [{"name": "basic_arithmetc"}],
            {},
            "datasets[0].name='basic_arithmetc': no such reasoning-gym dataset; did you mean ['basic_arithmetic'",
        ),
        (
            [{"name": "chain_sum", "config": {"max_term": 3}}],
            {},
            "datasets[0].config: ['max_term'] are not options of 'chain_sum'; its options are ['allow_negation'",
        ),
        (
            [{"name": "chain_sum", "config": {"min_terms": 5, "max_terms": 2}}],
            {},
            "the 'chain_sum' generator refuses it (max_terms must be >= min_terms)",
        ),
        ([{"name": "chain_sum", "weight": 0}], {}, "datasets[0].weight=0: must be a number > 0"),
        ([{"name": "chain_sum", "config": {"seed": 3}}], {}, "seed and size are set by data.generate"),
        ([{"name": "rush_hour"}], {}, "its verifier needs more than the JSON of an item's answer and metadata"),
        (
            [{"name": "chain_sum"}],
            {"test_seed": 100},
            "data.generate.test_seed=100: the validation split (Random seeds 100..199) overlaps the training split's "
            "(data.generate.seed=1: 1..600), so they would share problems; set data.generate.test_seed=1000601",
        ),
        ([{"name": "chain_sum"}], {"test_seed": None}, "data.generate.test_seed is null but data.task=reasoning_gym"),
    ],
)
def test_bad_recipes_are_refused_naming_the_key(datasets: list[dict], generate: dict, expected: str) -> None:
    problems = check_options(_data(datasets, **generate).generate)
    assert len(problems) == 1 and expected in problems[0]


def test_the_config_loader_refuses_a_bad_recipe_before_anything_starts() -> None:
    """What ``trainer.py`` exits 2 with: the loader's refusal names the key."""
    lines = refusal_lines(
        [
            "data.task=reasoning_gym",
            "data.train_path=null",
            "data.test_path=null",
            "data.generate.test_seed=5",
            "data.generate.options.datasets.basic_arithmetik.weight=1",
        ]
    )
    assert any("data.generate.options.datasets[0].name='basic_arithmetik'" in line for line in lines)
    assert any(line.startswith("data.generate.test_seed=5: the validation split") for line in lines)
