"""The configuration reference: every key documented, the generated file current, the rules read from the checks."""

from __future__ import annotations

from dataclasses import dataclass

from relay.config.reference import REFERENCE_PATH, field_comments, key_docs, render, undocumented_keys


@dataclass
class _Example:
    """A section."""

    # Two lines
    # above the field.
    a: int = 1  # and one at its end
    b: str = "x"  # only at the end

    c: float = 0.0


def test_field_comments_golden() -> None:
    """The block right above a field and the comment at its end; a field with neither has none."""
    assert field_comments(_Example) == {
        "a": "Two lines above the field. and one at its end",
        "b": "only at the end",
        "c": "",
    }


def test_every_schema_key_has_a_meaning() -> None:
    assert undocumented_keys() == [], "add a comment on or above each of these fields in the schema"


def test_the_generated_reference_is_current() -> None:
    assert REFERENCE_PATH.read_text() == render(), "stale: run python -m relay.config.reference --write"


def test_types_defaults_and_allowed_values_come_from_their_one_home() -> None:
    docs = key_docs()
    engine = docs["rollout.engine"]
    assert (engine.type, engine.default, engine.allowed) == ("str", "vllm", "hf | vllm")  # from the check
    assert docs["train.optimizer.name"].allowed == "adamw | lion | sgd"  # from the optimizer registry
    assert docs["model.lora"].type.startswith("section | null") and docs["model.lora.rank"].default == 16
    assert docs["rollout.agent.max_turns"].allowed == ">= 1"  # a check that runs only with the agent loop on
    assert docs["trainer.save_final"].default is True
    assert "rollout.resources.cpus" in docs and "derived" not in " ".join(docs)


def test_explain_text_of_one_key() -> None:
    text = key_docs()["rollout.engine"].text()
    assert text.splitlines()[:4] == ["rollout.engine", "type: str", "default: vllm", "allowed: hf | vllm"]
