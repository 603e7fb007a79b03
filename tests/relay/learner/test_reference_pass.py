"""The learner's reference forward as a program of its own (relay/learner/reference_pass.py): the step's settings
read the reference from the batch, and only learner-side reference settings build the pass."""

import dataclasses

import pytest

from relay.learner.grpo_loss import LossSettings
from relay.learner.reference_pass import make_reference_pass, step_settings


def _settings(ref_in_learner: bool) -> LossSettings:
    return LossSettings(0.2, 0.2, 0.5, "low_var_kl", 1.0, old_from_batch=False, ref_in_learner=ref_in_learner)


def test_the_step_reads_the_reference_from_its_batch() -> None:
    own = _settings(ref_in_learner=True)
    step = step_settings(own)
    assert not step.ref_in_learner and step.reads_reference  # the KL term reads batch["ref_log_probs"]
    assert dataclasses.replace(step, ref_in_learner=True) == own  # nothing else changes
    fed = _settings(ref_in_learner=False)
    assert step_settings(fed) is fed


def test_the_pass_needs_learner_side_reference_settings() -> None:
    with pytest.raises(ValueError, match="do not compute the reference in the learner"):
        make_reference_pass(None, _settings(ref_in_learner=False))  # type: ignore[arg-type]
