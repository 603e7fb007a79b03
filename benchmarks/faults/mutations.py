"""Known-bad recoveries: the defects a fault-injection campaign's verdict exists to catch, put into a run on purpose.

A check is only as good as a known-bad case it rejects. Each :class:`Mutation` here patches Relay's code in the
processes of one campaign run so that a recovery goes wrong the way real ones have (an update applied twice, the
optimizer's moments lost, the data cursor off by a batch, ...); :mod:`benchmarks.faults.chaos` runs it with the fault
that leads into that recovery, and its verdict must end "failed", naming the comparison that caught it.

The patches live in this harness, never in the product. They reach every process of the run through Python's
``sitecustomize`` hook: the campaign puts :data:`MUTANTS_DIR` on ``PYTHONPATH`` (the Ray head's, so every worker it
starts inherits it, and the trainer's) and writes the mutation's name beside the fault's marker
(``<marker>.mutation``); :func:`install`, run by ``benchmarks/faults/mutants/sitecustomize.py`` at interpreter start,
reads ``RELAY_FAULT``, finds that file and patches the target module when it is imported. A process without
``RELAY_FAULT``, or whose fault has no mutation file, is untouched.

Most mutations act only in a *recovery* process: a role object built after the fault fired (a restarted actor, a
resumed run's actors and driver), which is how the defect they stand for shows up: a restarted learner that applies
its first update twice behaves like a learner restored from the wrong state. ``always=True`` ones act in every
process of the run (a checkpoint writer that stores the previous step's optimizer state).

Worked example: ``update_twice`` with the fault ``learner.update`` / step 1 / kill: the learner dies in step 1's
update, the run exits 1, ``--resume`` starts a new learner from checkpoint 1, and that learner's first update runs
twice; the final policy, the optimizer state and ``actor/optimizer_steps`` then differ from the undisturbed run's.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from relay.faults import FAULT_ENV, Fault

MUTANTS_DIR = Path(__file__).resolve().parent / "mutants"
MUTATION_SUFFIX = ".mutation"


@dataclass(frozen=True)
class Mutation:
    """A known-bad recovery: ``patch`` changes ``module`` once it is imported; ``fault`` is the (point, step, action)
    that leads into the recovery it breaks; ``what`` says what goes wrong."""

    name: str
    module: str
    patch: Callable[[ModuleType, Callable[[], bool]], None]
    fault: tuple[str, int, str]
    what: str
    always: bool = False


def mutation_file(marker: str | Path) -> Path:
    return Path(f"{marker}{MUTATION_SUFFIX}")


def arm(marker: str | Path, name: str) -> None:
    """Make the run whose fault has ``marker`` run with mutation ``name``."""
    if name not in MUTATIONS:
        raise ValueError(f"unknown mutation {name!r}; known: {', '.join(MUTATIONS)}")
    mutation_file(marker).write_text(name)


def pythonpath(env: dict[str, str]) -> str:
    """``PYTHONPATH`` with the mutants' directory first (then the repository, which ``sitecustomize`` imports
    from before the script's directory is on ``sys.path``)."""
    parts = [str(MUTANTS_DIR), str(MUTANTS_DIR.parents[2]), *filter(None, env.get("PYTHONPATH", "").split(":"))]
    return ":".join(dict.fromkeys(parts))


# -- the patches --------------------------------------------------------------------------------------------------


def _recovery_flag(cls: type, recovering: Callable[[], bool]) -> None:
    """Mark each ``cls`` object with whether it was built after the fault fired (``_mutant_recovery``)."""
    init = cls.__init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._mutant_recovery = recovering()
        init(self, *args, **kwargs)

    cls.__init__ = __init__


def _first_update(module: ModuleType, recovering: Callable[[], bool], twice: bool) -> None:
    """A recovery learner's first update applied twice (``twice``) or not at all (its metrics still returned)."""
    import jax
    import jax.numpy as jnp

    cls = module.JaxLearner
    _recovery_flag(cls, recovering)
    update = cls.update

    def mutated(self, *args: Any, **kwargs: Any) -> dict:
        if not self._mutant_recovery:
            return update(self, *args, **kwargs)
        self._mutant_recovery = False  # the first update only
        if twice:
            update(self, *args, **kwargs)
            return update(self, *args, **kwargs)
        # copies: the update donates the params' and optimizer state's buffers to XLA, which frees them
        copy = lambda tree: jax.tree_util.tree_map(jnp.copy, tree)  # noqa: E731
        counters = (self.optimizer_steps, self.consecutive_skips, self.skipped_total)
        params, opt_state = copy(self.params), copy(self.opt_state)
        metrics = update(self, *args, **kwargs)
        self.params, self.opt_state = params, opt_state
        self.optimizer_steps, self.consecutive_skips, self.skipped_total = counters
        return metrics

    cls.update = mutated


def _moments_reset(module: ModuleType, recovering: Callable[[], bool]) -> None:
    """Every floating leaf of a restored optimizer state zeroed (Adam's moments lost; its step count kept)."""
    import jax
    import jax.numpy as jnp

    load = module._load_optimizer_and_counters

    def mutated(learner: Any, directory: Path) -> dict:
        counters = load(learner, directory)
        zero = lambda x: x * 0 if jnp.issubdtype(x.dtype, jnp.floating) else x  # noqa: E731
        learner.opt_state = jax.tree_util.tree_map(zero, learner.opt_state)
        return counters

    module._load_optimizer_and_counters = mutated


def _cursor_shift(module: ModuleType, recovering: Callable[[], bool], batches: int) -> None:
    """A restored data cursor ``batches`` batches off (-1: one batch early, +1: one late)."""
    cls = module.PromptBatcher
    load = cls.load_state_dict

    def mutated(self, state: dict) -> None:
        load(self, state)
        flat = self.epoch * len(self._examples) + self.position + batches * self.batch_size
        epoch, self.position = divmod(max(0, flat), len(self._examples))
        if epoch != self.epoch:
            self.epoch, self._order = epoch, self._permutation(epoch)

    cls.load_state_dict = mutated


def _sampling_seed(module: ModuleType, recovering: Callable[[], bool]) -> None:
    """A restarted rollout seeded with another stream (its sampling RNG not restored)."""
    cls = module.RolloutWorker
    _recovery_flag(cls, recovering)
    init = cls.__init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self._mutant_recovery:
            self.seed += 1

    cls.__init__ = __init__


def _stale_reward_config(module: ModuleType, recovering: Callable[[], bool]) -> None:
    """A restarted reward actor built from a stale config: a user function's numeric arguments halved, the rule
    graders' format score raised."""
    cls = module.RewardWorker
    init = cls.__init__

    def __init__(self, settings: Any, *args: Any, **kwargs: Any) -> None:
        if recovering():
            section = settings.section
            kwargs_cfg = dict(section.function_kwargs or {})
            for key, value in kwargs_cfg.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    kwargs_cfg[key] = type(value)(value / 2)
            stale = dataclasses.replace(section, function_kwargs=kwargs_cfg, format_score=section.format_score + 0.1)
            settings = dataclasses.replace(settings, section=stale)
        init(self, settings, *args, **kwargs)

    cls.__init__ = __init__


def _stale_rollout_weights(module: ModuleType, recovering: Callable[[], bool]) -> None:
    """A restarted rollout's first weight load skipped while it reports the new version (it samples with the
    weights it was built from)."""
    cls = module.RolloutWorker
    _recovery_flag(cls, recovering)
    load = cls.load_weights

    def mutated(self, weights: Any, version: int) -> dict:
        if not self._mutant_recovery:
            return load(self, weights, version)
        self._mutant_recovery = False
        self.weights_version = version
        return {"seconds": 0.0, "bytes": 0}

    cls.load_weights = mutated


def _optimizer_one_step_old(module: ModuleType, recovering: Callable[[], bool]) -> None:
    """Every checkpoint's optimizer state is the previous checkpoint's (its policy is current)."""
    write = module.write_learner_state
    previous: dict[str, Any] = {}

    def mutated(directory: Path, state: dict) -> dict:
        current = state["optimizer"]
        state = {**state, "optimizer": previous.get("optimizer", current)}
        previous["optimizer"] = current
        return write(directory, state)

    module.write_learner_state = mutated


_LEARNER, _CHECKPOINTING, _DATA = "relay.learner.learner", "relay.learner.checkpointing", "relay.data.gsm8k"
_BETWEEN_STEPS = ("driver.between_steps", 1, "kill")
# fmt: off
MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation("update_twice", _LEARNER, lambda mod, rec: _first_update(mod, rec, twice=True),
                 ("learner.update", 1, "kill"), "a restarted learner applies its first update twice"),
        Mutation("update_lost", _LEARNER, lambda mod, rec: _first_update(mod, rec, twice=False),
                 ("learner.update", 1, "kill"), "a restarted learner loses its first update (its metrics still sent)"),
        Mutation("moments_reset", _CHECKPOINTING, _moments_reset, _BETWEEN_STEPS,
                 "the optimizer's moments reset on resume"),
        Mutation("cursor_early", _DATA, lambda mod, rec: _cursor_shift(mod, rec, -1), _BETWEEN_STEPS,
                 "the data cursor resumed one batch early"),
        Mutation("cursor_late", _DATA, lambda mod, rec: _cursor_shift(mod, rec, +1), _BETWEEN_STEPS,
                 "the data cursor resumed one batch late"),
        Mutation("sampling_rng", "roles.rollout", _sampling_seed, ("rollout.generate", 1, "kill"),
                 "a restarted rollout's sampling RNG not restored"),
        Mutation("stale_reward_config", "roles.reward", _stale_reward_config, ("reward.score", 1, "kill"),
                 "a restarted reward actor grades with a stale config"),
        Mutation("stale_rollout_weights", "roles.rollout", _stale_rollout_weights, ("rollout.generate", 1, "kill"),
                 "a restarted rollout left on the weights it was built from"),
        Mutation("optimizer_one_step_old", _CHECKPOINTING, _optimizer_one_step_old, ("driver.between_steps", 2, "kill"),
                 "every checkpoint's optimizer file one step older than its policy", always=True),
    )
}
# fmt: on


# -- installing one in a process ----------------------------------------------------------------------------------


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders and patches the module right after it has executed."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # the real spec, from the finders after this one
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, patch = spec.loader.exec_module, self.patch

        def exec_module(module: ModuleType) -> None:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install(environ: dict[str, str] | None = None) -> str | None:
    """Arm this process with the mutation beside its fault's marker, if any; returns its name."""
    environ = os.environ if environ is None else environ
    text = environ.get(FAULT_ENV)
    if not text:
        return None
    marker = Fault.from_env(text)[0].marker  # the first fault's: the one leading into the recovery
    path = mutation_file(marker)
    if not path.is_file():
        return None
    mutation = MUTATIONS[path.read_text().strip()]
    recovering = (lambda: True) if mutation.always else (lambda: Path(marker).exists())
    if mutation.module in sys.modules:
        mutation.patch(sys.modules[mutation.module], recovering)
    else:
        sys.meta_path.insert(0, _PatchOnImport(mutation.module, lambda module: mutation.patch(module, recovering)))
    return mutation.name
