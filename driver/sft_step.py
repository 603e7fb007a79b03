"""A warm start's step and validation: calls on the learner group alone (no rollout, reward or weight sync)."""

from __future__ import annotations

from driver.role_group import Roles
from driver.step_metrics import memory_metrics
from driver.timing import PhaseTimer
from relay.data_proto import DataProto
from relay.learner.inputs import LEARNER_INPUTS
from relay.metrics import outcomes as om
from relay.metrics import system as sm
from relay.metrics import validation as vm
from relay.rank_metrics import merge_rank_metrics


def learner_share(batch: DataProto) -> DataProto:
    """The fields of ``batch`` the learner reads (its padded arrays and the prompt width)."""
    return batch.select([k for k in LEARNER_INPUTS if k in batch.batch], [])


def run_sft_step(roles: Roles, batch: DataProto, step: int) -> dict[str, float]:
    """One supervised update of ``batch`` on every learner host (each its share of the traces; the weights are not
    published): the learner's metrics, ``sft/trained_tokens`` (the step's trained response tokens) and
    ``timing/update`` / ``timing/step``."""
    timer = PhaseTimer(step)
    with timer.phase(sm.TIMING_STEP), timer.phase(sm.TIMING_UPDATE):
        pending = roles.learner.submit("update", learner_share(batch), False, step=step)
        outs = roles.learner.answers(pending, "update", "update")
    roles.last_updated_step = step
    metrics = {sm.STEP: step, **merge_rank_metrics([m for _, m in outs])}
    metrics[om.SFT_TRAINED_TOKENS] = float(batch.batch["response_mask"].sum())
    return {**metrics, **memory_metrics(metrics), **timer.metrics()}


def run_sft_validation(roles: Roles, batch: DataProto, step: int) -> dict[str, float]:
    """The validation traces' loss under the weights after ``step`` updates (``val/loss``, ``val/seconds``)."""
    timer = PhaseTimer(step)
    with timer.phase(vm.VAL_SECONDS):
        pending = roles.learner.submit("validation_loss", learner_share(batch), step=step)
        outs = roles.learner.answers(pending, "validation loss")
    return {**merge_rank_metrics(outs), **timer.metrics()}
