"""Each role's declaration names code that exists, in the layer that uses it, and every reader follows it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from relay.role_declarations import (
    ROLE_DECLARATIONS,
    ROLE_NAMES,
    RoleDeclaration,
    colocatable_roles,
    declaration,
    holds_weights,
    resolve,
    track_order,
)

# Which top-level package each import path of a declaration must live in: the layer that calls it.
PATH_LAYERS = {"actor": "roles", "settings": "driver", "group": "driver", "slots": "placement", "memory": "placement"}


@pytest.mark.parametrize("role", ROLE_NAMES)
def test_every_path_resolves_in_the_layer_that_calls_it(role: str) -> None:
    from driver.role_group import RoleGroup

    declared = declaration(role)
    for field, layer in PATH_LAYERS.items():
        path = getattr(declared, field)
        assert path.split(".", 1)[0] == layer, f"{role}.{field}={path} is not in {layer}/"
        assert callable(resolve(path)), f"{role}.{field}={path}"
    assert issubclass(resolve(declared.group), RoleGroup)
    arity = {"settings": 2, "slots": 2, "memory": 3}  # settings(start, slot), slots(cfg, make), memory(in, slot, ram)
    for field, count in arity.items():
        params = list(inspect.signature(resolve(getattr(declared, field))).parameters)
        assert len(params) == count, f"{role}.{field}: {params}"


def test_a_path_that_names_nothing_is_an_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="rollout_slotz"):
        resolve("placement.role_slots:rollout_slotz")
    with pytest.raises(
        KeyError, match="unknown role 'critic'; roles are rollout, actor_ref, reward, reward_model, tools, learner"
    ):
        declaration("critic")


def test_the_rules_read_from_the_declarations() -> None:
    restarted = [r.name for r in ROLE_DECLARATIONS if r.restart == "relay"]
    assert restarted == ["rollout", "actor_ref", "reward", "reward_model", "tools"]
    assert [holds_weights(r, actor_copy=False) for r in ROLE_NAMES] == [True, False, False, False, False, False]
    assert [holds_weights(r, actor_copy=True) for r in ROLE_NAMES] == [True, True, False, False, False, False]
    assert colocatable_roles() == ("rollout", "actor_ref", "reward", "reward_model", "learner")
    assert track_order() == ("rollout", "tools", "actor_ref", "reward", "reward_model", "learner")
    for r in ROLE_DECLARATIONS:  # a role loading weights says how its answers carry the version, and what counts
        assert (r.weights == "none") == (r.version_key is None) == (r.stale_metric is None) == (r.load_metric is None)
        assert (r.dispatch == "caller") == (r.called_by is not None)


def test_a_declared_role_reaches_the_plan_the_memory_estimate_and_the_config_checks(
    tiny_model_dir, monkeypatch
) -> None:
    """The readers follow the declarations, not lists of their own: a declaration turned to ``colocatable: False``
    changes what the colocation check accepts."""
    import relay.role_declarations as declarations
    from placement.memory import estimate_memory
    from placement.model_shape import read_model_shape
    from placement.plan import build_plan
    from relay.config import load_config
    from relay.config.validate_placement import _colocate

    cfg = load_config(None, [f"model.path={tiny_model_dir}"]).cfg
    plan = build_plan(cfg)
    assert [s.role for s in plan.slots] == ["rollout", "actor_ref", "reward", "learner"]
    estimate = estimate_memory(cfg, plan, read_model_shape(tiny_model_dir))
    assert [a.actor for a in estimate.actors] == ["rollout-0", "actor_ref-0", "reward-0", "learner-0"]

    problems: list[str] = []
    _colocate(problems, [["reward", "learner"]])
    assert problems == []
    changed = [dataclasses.replace(r, colocatable=r.name != "reward") for r in ROLE_DECLARATIONS]
    monkeypatch.setattr(declarations, "ROLE_DECLARATIONS", tuple(changed))
    _colocate(problems, [["reward", "learner"]])
    assert problems and "unknown role 'reward'" in problems[0], problems


def test_a_declaration_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        declaration("rollout").restart = "never"  # type: ignore[misc]
    assert isinstance(declaration("tools"), RoleDeclaration)


def test_the_worked_examples_in_the_docstrings_hold() -> None:
    import doctest

    import relay.role_declarations

    assert doctest.testmod(relay.role_declarations).failed == 0
