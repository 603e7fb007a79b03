"""The columns of the per-step tables: the terminal's table (:mod:`driver.console`) and the run summary's Markdown
table (:mod:`relay.run.summarize`) read the same :class:`Column` entries.

A column names its metric, the terminal's header and minimum width, and the number's format without a width
(``.3f``); ``summary`` places it in the run summary's table (its position there and its header), or leaves it out
(None). The terminal shows :data:`STEP_COLUMNS` in their order, plus :data:`AGENT_COLUMN` and :data:`LEVEL_COLUMN`
for multi-turn and curriculum runs, or :data:`SFT_COLUMNS` for a warm start.

Worked example: ``Column(om.REWARD_MEAN, "reward", ".3f", 6, summary=(1, "reward"))`` prints ``0.031`` as
``" 0.031"`` on the terminal (:meth:`Column.console_format`: ``"{:>6.3f}"``) and ``"0.031"`` in the summary
(:meth:`Column.summary_format`: ``"{:.3f}"``), its second column.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.metrics import validation as vm


@dataclass(frozen=True)
class Column:
    """One metric's column: the terminal's header, the number's format spec (no width), the terminal's minimum
    width, and the run summary's (position, header), None where the summary leaves it out."""

    key: str
    header: str
    spec: str
    width: int
    summary: tuple[int, str] | None = None

    def console_format(self) -> str:
        """The terminal's format: the number right-aligned in ``width`` characters."""
        return f"{{:>{self.width}{self.spec}}}"

    def summary_format(self) -> str:
        """The run summary's format: the number alone."""
        return f"{{:{self.spec}}}"


STEP = Column(sm.STEP, "step", "d", 4, summary=(0, "step"))
REWARD = Column(om.REWARD_MEAN, "reward", ".3f", 6, summary=(1, "reward"))
ACCURACY = Column(om.REWARD_ACCURACY, "acc", ".3f", 5, summary=(2, "acc"))
RESPONSE_LENGTH = Column(om.RESPONSE_LENGTH_MEAN, "resp_len", ".1f", 8, summary=(4, "resp_len"))
KL = Column(pm.ACTOR_KL, "kl", ".5f", 8, summary=(3, "kl"))
LOSS = Column(pm.ACTOR_LOSS, "loss", ".4f", 8)
GAP_MAX = Column(pm.LOGPROB_GAP_ROLLOUT_MAX, "gap_max", ".4f", 7)
T_ROLLOUT = Column(sm.TIMING_ROLLOUT, "t_roll", ".1f", 6, summary=(6, "t_rollout"))
T_REF = Column(sm.TIMING_ACTOR_REF_AND_REWARD, "t_ref", ".1f", 6, summary=(7, "t_ref+reward"))
T_UPDATE = Column(sm.TIMING_UPDATE, "t_upd", ".1f", 6, summary=(8, "t_update"))
T_SYNC = Column(sm.TIMING_SYNC, "t_sync", ".2f", 6, summary=(9, "t_sync"))
T_STEP = Column(sm.TIMING_STEP, "t_step", ".1f", 6, summary=(5, "t_step (s)"))
ROLLOUT_TOKENS = Column(sm.THROUGHPUT_ROLLOUT, "roll_tok/s", ".0f", 10)
LEARNER_TOKENS = Column(sm.THROUGHPUT_LEARNER, "learn_tok/s", ".0f", 11)
MEMORY = Column(sm.MEMORY_ROLES_PEAK, "mem_GiB", ".1f", 7)

# The step table, in the terminal's order.
STEP_COLUMNS: tuple[Column, ...] = (
    STEP,
    REWARD,
    ACCURACY,
    RESPONSE_LENGTH,
    KL,
    LOSS,
    GAP_MAX,
    T_ROLLOUT,
    T_REF,
    T_UPDATE,
    T_SYNC,
    T_STEP,
    ROLLOUT_TOKENS,
    LEARNER_TOKENS,
    MEMORY,
)
# Multi-turn runs (rollout.agent.enable): tool calls per response, after resp_len.
AGENT_COLUMN = Column(om.AGENT_TOOL_CALLS_PER_RESPONSE, "calls", ".2f", 5)
# A curriculum (data.curriculum): the level the step trained on (0 the easiest), after acc.
LEVEL_COLUMN = Column(om.CURRICULUM_LEVEL, "level", ".0f", 5)
# A warm start's table (sft.enable): the training and validation loss, the update's time and throughput.
SFT_COLUMNS: tuple[Column, ...] = (
    STEP,
    LOSS,
    Column(vm.VAL_LOSS, "val_loss", ".4f", 8),
    Column(pm.ACTOR_GRAD_NORM, "grad_norm", ".3f", 9),
    Column(om.SFT_TRAINED_TOKENS, "tokens", ".0f", 6),
    T_UPDATE,
    T_STEP,
    LEARNER_TOKENS,
    MEMORY,
)


def summary_columns() -> tuple[Column, ...]:
    """The run summary's columns in its order: the step table's columns that have a summary position."""
    placed = [column for column in STEP_COLUMNS if column.summary is not None]
    return tuple(sorted(placed, key=lambda column: column.summary[0]))
