"""reasoning-gym as a generated task: procedural problems with a verifier and a dial for difficulty.

`reasoning-gym <https://pypi.org/project/reasoning-gym/>`_ (Apache-2.0) has ~100 generators (arithmetic, algebra,
logic, games, ...), each a dataset class with a config of difficulty knobs and a ``score_answer`` verifier.
``data.generate.options.datasets`` lists the datasets a run trains on, each with its name, a weight and its
generator config; several make a weighted mix (reasoning-gym's ``CompositeDataset``)::

    data:
      task: reasoning_gym
      train_path: null
      test_path: null
      generate:
        seed: 1              # training rows
        test_seed: 1000001   # validation rows
        train_size: 5000
        test_size: 200
        options:
          datasets:
            - {name: basic_arithmetic, weight: 1, config: {min_terms: 2, max_terms: 2, operators: ["+"]}}

**Splits that share no problem.** reasoning-gym builds item ``i`` of a dataset seeded ``s`` from
``Random(s + i)`` (a mix also draws sub-dataset ``k``'s item from ``Random(s + k + 1 + i)``), so two datasets
whose seeds are close share almost every problem. The validation rows come from ``test_seed`` and the training
rows from ``seed``, and the random streams each uses (:func:`seed_streams`) must not meet: a config whose streams
overlap is refused before anything starts. Small problem spaces still repeat a question by chance (two-term
sums of 1-2 digits have ~5,000 up to the order of their terms), so the validation split keeps distinct problems
and training rows that are one of them, terms reordered or not, are dropped, and the count is logged
(:meth:`relay.tasks.run_tasks.RunTasks.read`, :mod:`relay.tasks.problem_key`).

A row is ``{"uid", "question", "answer", "dataset"}``: ``answer`` is the item encoded for the grader
(:func:`relay.scoring.reasoning_gym.encode_ground_truth`), ``dataset`` the generator's name, which validation
reports on its own (``val/<dataset>/...``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from relay.scoring.reasoning_gym import SOURCE_KEY, encode_ground_truth

# Config fields Relay sets itself: the seed and the count of each split.
RELAY_SET_FIELDS = frozenset({"seed", "size"})
INSTALL_HINT = "install it with `pip install -r requirements/tasks.lock` (scripts/setup.sh does)"


def dataset_specs(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``options["datasets"]`` as ``[{"name", "weight", "config"}]``: a list of such entries, or a mapping of
    name to ``{"weight", "config"}`` (easier to override from the command line); weight 1 and an empty config by
    default. ValueError naming the key when there is none or an entry is not a mapping."""
    datasets = _plain(options.get("datasets"))
    if isinstance(datasets, Mapping):
        datasets = [{"name": name, **dict(entry or {})} for name, entry in datasets.items()]
    if not isinstance(datasets, Sequence) or isinstance(datasets, str) or not datasets:
        raise ValueError(
            f"data.generate.options.datasets={datasets!r}: list the datasets to generate, e.g. "
            "[{name: basic_arithmetic, weight: 1, config: {max_terms: 2}}]"
        )
    specs = []
    for i, entry in enumerate(datasets):
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise ValueError(f"data.generate.options.datasets[{i}]={entry!r}: needs a name (and a weight, a config)")
        config = dict(entry.get("config") or {})
        specs.append({"name": str(entry["name"]), "weight": entry.get("weight", 1), "config": config})
    return specs


def _plain(value: Any) -> Any:
    """An OmegaConf node as plain lists and dicts (a generator gets what a YAML file says); anything else as is."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def check_options(generate: Any) -> list[str]:
    """The problems with ``data.generate`` for reasoning-gym, each naming its key and the fix; [] if none: the
    package, each dataset's name (the close names when unknown), weight and config (its generator's own option
    names, validated by the generator), and the validation split's seed."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError as e:
        return [f"data.task=reasoning_gym: the reasoning-gym package is not installed ({e}); {INSTALL_HINT}"]
    try:
        specs = dataset_specs(dict(generate.options))
    except ValueError as e:
        return [str(e)]
    problems = []
    for i, spec in enumerate(specs):
        problems += _spec_problems(f"data.generate.options.datasets[{i}]", spec, DATASETS)
    names = [spec["name"] for spec in specs]
    if len(set(names)) < len(names):
        problems.append(f"data.generate.options.datasets: {names} names a dataset twice; give each once")
    problems += _seed_problems(generate, len(specs))
    return problems


def _spec_problems(key: str, spec: Mapping[str, Any], registered: Mapping[str, Any]) -> list[str]:
    name, weight, config = spec["name"], spec["weight"], spec["config"]
    if name == "composite":
        return [f"{key}.name='composite': list the mixed datasets themselves; several entries make the mix"]
    if name not in registered:
        close = difflib.get_close_matches(name, list(registered), n=5, cutoff=0.6)
        hint = f"did you mean {close}?" if close else f"see reasoning_gym.factory.DATASETS ({len(registered)} names)"
        return [f"{key}.name={name!r}: no such reasoning-gym dataset; {hint}"]
    problems = []
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        problems.append(f"{key}.weight={weight!r}: must be a number > 0")
    config_cls = registered[name][1]
    known = {f.name for f in dataclasses.fields(config_cls)} - RELAY_SET_FIELDS
    unknown = sorted(set(config) - known - RELAY_SET_FIELDS)
    if unknown:
        problems.append(f"{key}.config: {unknown} are not options of {name!r}; its options are {sorted(known)}")
    elif set(config) & RELAY_SET_FIELDS:
        problems.append(f"{key}.config: seed and size are set by data.generate (seed, test_seed, *_size); remove them")
    else:
        try:
            config_cls(**config).validate()
        except (AssertionError, ValueError, TypeError) as e:
            problems.append(f"{key}.config={config}: the {name!r} generator refuses it ({e or 'invalid'})")
        else:
            problems += _round_trip_problems(key, spec)
    return problems


def _round_trip_problems(key: str, spec: Mapping[str, Any]) -> list[str]:
    """A dataset whose verifier does not give its own first item's answer 1.0 once the item is encoded as a ground
    truth (its metadata does not survive JSON; of reasoning-gym 0.1.25's datasets: arc_agi, boxnet, graph_color,
    propositional_logic, rearc, rubiks_cube, rush_hour) could never reward a right answer: refused."""
    from relay.scoring.reasoning_gym import verifier_score

    item = _dataset([dict(spec)], seed=0, size=1)[0]
    if verifier_score(item["answer"], encode_ground_truth(item)) != 1.0:
        return [
            f"{key}.name={spec['name']!r}: its verifier needs more than the JSON of an item's answer and metadata "
            "(the grader's ground truth), so a right answer could not score 1; choose another dataset"
        ]
    return []


def seed_streams(seed: int, count: int, datasets: int) -> range:
    """The ``Random(s)`` seeds ``s`` that ``count`` items of a ``datasets``-dataset recipe seeded ``seed`` use.

    One dataset: item ``i`` uses ``seed + i``. A mix also picks item ``i``'s dataset with ``Random(seed + i)`` and
    builds it as sub-dataset ``k``'s item ``i``, seeded ``seed + k + 1 + i``. Worked example: ``seed_streams(0,
    200, 1) == range(0, 200)``; ``seed_streams(0, 200, 2) == range(0, 202)``.
    """
    return range(seed, seed + count + (datasets if datasets > 1 else 0))


def _seed_problems(generate: Any, datasets: int) -> list[str]:
    test_seed = generate.get("test_seed") if isinstance(generate, Mapping) else getattr(generate, "test_seed", None)
    train = seed_streams(int(generate.seed), int(generate.train_size), datasets)
    suggestion = train.stop + 1_000_000
    if test_seed is None:
        return [
            f"data.generate.test_seed is null but data.task=reasoning_gym draws item i from Random(seed + i): set it "
            f"far from data.generate.seed={generate.seed}, e.g. data.generate.test_seed={suggestion}"
        ]
    test = seed_streams(int(test_seed), int(generate.test_size), datasets)
    if test.start < train.stop and train.start < test.stop:
        return [
            f"data.generate.test_seed={test_seed}: the validation split (Random seeds {test.start}..{test.stop - 1}) "
            f"overlaps the training split's (data.generate.seed={generate.seed}: {train.start}..{train.stop - 1}), "
            f"so they would share problems; set data.generate.test_seed={suggestion}"
        ]
    return []


def generate_reasoning_gym(count: int, seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``count`` rows ``{"uid", "question", "answer", "dataset"}`` of the recipe in ``options`` (module
    docstring), seeded ``seed``; row ``i`` is the same whatever ``count``. ``uid`` is ``rg-<seed>-<i>``."""
    specs = dataset_specs(options)
    dataset = _dataset(specs, seed, max(count, 1))
    rows = []
    for i in range(count):
        item = dataset[i]
        rows.append(
            {
                "uid": f"rg-{seed}-{i}",
                "question": item["question"],
                "answer": encode_ground_truth(item),
                "dataset": item["metadata"][SOURCE_KEY],
            }
        )
    return rows


def _dataset(specs: list[dict[str, Any]], seed: int, size: int) -> Any:
    import reasoning_gym
    from reasoning_gym.composite import CompositeConfig, CompositeDataset, DatasetSpec

    if len(specs) == 1:
        return reasoning_gym.create_dataset(specs[0]["name"], seed=seed, size=size, **specs[0]["config"])
    mix = [DatasetSpec(name=s["name"], weight=float(s["weight"]), config=dict(s["config"])) for s in specs]
    return CompositeDataset(CompositeConfig(size=size, seed=seed, datasets=mix))
