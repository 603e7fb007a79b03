"""DAPO's dynamic sampling on the driver: sample, grade, keep the groups with reward variance, and sample
more prompts in extra passes until the step has ``rollout.batch_size`` of them.

With ``algorithm.filter_groups.enable`` a step's phases before the update run as:

    pass 0:  rollout(step's prompts) -> reward -> split groups (signal | constant)
    pass k:  rollout(more prompts)   -> reward -> split          while signal < wanted and k <= max_extra_passes
    then:    the first ``wanted`` signal groups (+ constant ones if the passes ran out) -> actor_ref log-probs

With ``filter_groups.retry_unsolved.enable`` pass 1 samples pass 0's unsolved prompts again (every sample wrong:
the zero-pass prompts GRPO gets no signal from) at ``retry_unsolved.temperature``, under new uids, before later
passes draw new prompts. Only the retried groups with a right sample may train (:meth:`Passes.add`); the others are
dropped, and ``reward/*`` and ``filter/sampled_*`` read the passes of new prompts only. The retried rows' rollout
log-probs are at the retry's temperature; the batch's ``temperature`` (which the reference and old-policy forwards
read) stays ``rollout.temperature``.

The reference forward runs once, on the trained rows only (not beside grading as in the unfiltered
step): on GSM8K with a small model three quarters of the groups are constant, and their reference
log-probs would be thrown away. Signal groups sampled beyond ``wanted`` are dropped (their prompts are
consumed, as in DAPO); the data cursor moves past every prompt sampled, so ``--resume`` continues after
them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from driver.role_group import Roles
from driver.step_metrics import sum_pass_metrics
from driver.timing import PhaseTimer
from relay.config import RelayConfig
from relay.data_proto import DataProto
from relay.grpo.group_filter import extra_pass_size, rows_of, split_groups, unsolved_groups
from relay.metrics import outcomes as om
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.rollout_batch import merge_rollout_parts

MorePrompts = Callable[[int, int], DataProto]
# (a pass's uids, its unsolved groups' uids) -> the prompt source's revisit queue (data.revisit_unsolved)
GradeObserver = Callable[[Sequence[str], Collection[str]], None]
# algorithm.filter_groups.metric -> the reward role's per-row field it reads
METRIC_FIELDS = {"score": "scores", "acc": "acc"}


@dataclass
class Passes:
    """What the passes of one step sampled: the scored parts that may train, each pass's role metrics, the policy's
    samples (the passes of new prompts), and what a retry of unsolved prompts found."""

    parts: list[DataProto] = field(default_factory=list)  # every pass's rows that may train
    metrics: list[dict[str, float]] = field(default_factory=list)
    drawn: list[DataProto] = field(default_factory=list)  # the passes of new prompts, at the rollout's temperature
    kept: int = 0  # signal groups so far
    prompts: int = 0  # prompts sampled so far (retried ones included)
    retried: int = 0  # unsolved prompts sampled again (retry_unsolved)
    retries_solved: int = 0  # of those, the ones with a right sample in the retry

    def add(self, scored: DataProto, metrics: dict[str, float], field_name: str, prompts: int, retry: bool) -> None:
        """One pass's graded rows. A retry keeps only the groups it solved: a retried group with no right sample
        may still vary in score (a boxed wrong answer earns the format score, an unboxed one nothing), and training
        on it would teach the format of wrong answers from the retry's samples (``retry_hot`` in BENCHMARKS.md's
        "Unsolved prompts sampled again" boxed wrong answers once they were kept)."""
        self.metrics.append(metrics)
        self.prompts += prompts
        if retry:
            unsolved = set(unsolved_groups(scored.batch["acc"], scored.non_tensor["uid"]))
            self.retried, self.retries_solved = prompts, prompts - len(unsolved)
            scored = scored[np.flatnonzero([uid not in unsolved for uid in scored.non_tensor["uid"]])]
        else:
            self.drawn.append(scored)
        if len(scored):
            self.parts.append(scored)
            self.kept += len(split_groups(scored.batch[field_name], scored.non_tensor["uid"]).signal)

    def sampled(self, key: str) -> np.ndarray:
        """``key`` of every sample of the passes of new prompts (the policy's samples; retries left out)."""
        return np.concatenate([part.batch[key] for part in self.drawn])


def report_grades(observe: GradeObserver | None, scored: DataProto) -> None:
    """Tell ``observe`` (none: nothing to do) which groups of a pass of new prompts no sample solved."""
    if observe is not None:
        uids = scored.non_tensor["uid"]
        observe(list(uids), set(unsolved_groups(scored.batch["acc"], uids)))


def retry_prompts(prompts: DataProto, scored: DataProto) -> DataProto:
    """The rows of ``prompts`` whose groups in ``scored`` (their graded samples) are unsolved
    (:func:`relay.grpo.group_filter.unsolved_groups`), each under the uid ``<uid>/retry`` so that its retried
    samples form a group of their own."""
    unsolved = set(unsolved_groups(scored.batch["acc"], scored.non_tensor["uid"]))
    rows = np.array([i for i, uid in enumerate(prompts.non_tensor["uid"]) if uid in unsolved], dtype=np.int64)
    retried = prompts[rows]
    retried.non_tensor["uid"] = np.array([f"{uid}/retry" for uid in retried.non_tensor["uid"]], dtype=object)
    return retried


@dataclass(frozen=True)
class SamplePass:
    """One pass's prompts, its number in the step, and whether it retries unsolved prompts (at ``temperature``;
    None: the rollout's)."""

    prompts: DataProto
    number: int = 0
    retry: bool = False
    temperature: float | None = None


def _next_pass(
    prompts: DataProto, passes: Passes, cfg: RelayConfig, number: int, more_prompts: MorePrompts
) -> SamplePass:
    """Extra pass ``number``: with ``retry_unsolved``, pass 1 retries pass 0's unsolved prompts when it has any;
    otherwise new prompts, as many as the keep rate so far says the deficit needs
    (:func:`relay.grpo.group_filter.extra_pass_size`)."""
    fc, wanted = cfg.algorithm.filter_groups, len(prompts)
    if fc.retry_unsolved.enable and number == 1:
        retried = retry_prompts(prompts, passes.parts[0])
        if len(retried):
            return SamplePass(retried, number, True, fc.retry_unsolved.temperature)
    size = extra_pass_size(wanted - passes.kept, passes.prompts, passes.kept, wanted)
    return SamplePass(more_prompts(size, number), number)


def _sample_and_grade(
    roles: Roles, sample: SamplePass, cfg: RelayConfig, step: int
) -> tuple[DataProto, dict[str, float]]:
    """One pass: rollout, then grading; the rows with their scores and the pass's metrics (its grading time is
    ``timing/actor_ref_and_reward``, summed over the passes)."""
    timer = PhaseTimer(step)
    gen, metrics = roles.rollout.generate(sample.prompts, step, sample.number, sample.temperature)
    with timer.phase(sm.TIMING_ACTOR_REF_AND_REWARD):
        rw, rw_metrics = roles.reward.grade(gen, cfg.reward.mode, step)
    metrics = {**metrics, **rw_metrics, **timer.metrics()}
    return gen.union(rw), metrics


def collect_filtered(
    roles: Roles,
    prompts: DataProto,
    cfg: RelayConfig,
    step: int,
    more_prompts: MorePrompts,
    observe: GradeObserver | None = None,
) -> tuple[DataProto, dict[str, float]]:
    """The step's trained rows with rollout, reward and actor_ref fields (before the advantage), and the
    ``filter/*`` and phase metrics; each pass of new prompts is graded into ``observe`` (:func:`report_grades`)
    before the next pass draws."""
    fc = cfg.algorithm.filter_groups
    field_name, wanted = METRIC_FIELDS[fc.metric], len(prompts)
    timer, passes = PhaseTimer(step), Passes()
    sample = SamplePass(prompts)
    while True:
        with timer.phase(om.FILTER_EXTRA_ROLLOUT_SECONDS) if sample.number else nullcontext():
            scored, pass_metrics = _sample_and_grade(roles, sample, cfg, step)
        if not sample.retry:
            report_grades(observe, scored)
        passes.add(scored, pass_metrics, field_name, len(sample.prompts), sample.retry)
        if passes.kept >= wanted or sample.number >= fc.max_extra_passes:
            break
        sample = _next_pass(prompts, passes, cfg, sample.number + 1, more_prompts)
    merged = merge_rollout_parts(passes.parts)
    merged.meta_info.pop("metrics", None)
    split = split_groups(merged.batch[field_name], merged.non_tensor["uid"])
    short = max(0, wanted - len(split.signal))
    batch = merged[rows_of(split.signal[:wanted] + split.constant[:short])]
    with timer.phase(sm.TIMING_LOG_PROBS_OF_KEPT):
        lp, lp_metrics = roles.actor_ref.log_probs(roles.actor_ref.submit_log_probs(batch, step))
    metrics = {pm.ACTOR_REF_REF_FORWARD: 0.0, **sum_pass_metrics(passes.metrics), **lp_metrics}
    if lp is not None:
        batch = batch.union(lp)
    scores, acc = passes.sampled("scores"), passes.sampled("acc")
    timed = timer.metrics()
    metrics.update(
        {
            # the passes' grading and the kept rows' log-probs: the phase of the unfiltered step, run in parts
            sm.TIMING_ACTOR_REF_AND_REWARD: metrics[sm.TIMING_ACTOR_REF_AND_REWARD]
            + timed[sm.TIMING_LOG_PROBS_OF_KEPT],
            om.FILTER_GROUPS_KEPT: float(min(len(split.signal), wanted)),
            om.FILTER_GROUPS_DROPPED: float(len(split.constant) - short),
            om.FILTER_GROUPS_FILLED: float(short),
            om.FILTER_GROUPS_SURPLUS: float(max(0, len(split.signal) - wanted)),
            om.FILTER_EXTRA_PASSES: float(sample.number),
            om.FILTER_PROMPTS_SAMPLED: float(passes.prompts),
            om.FILTER_EXTRA_ROLLOUT_SECONDS: timed.get(om.FILTER_EXTRA_ROLLOUT_SECONDS, 0.0),
            om.FILTER_SAMPLED_REWARD_MEAN: float(scores.mean()),
            om.FILTER_SAMPLED_ACCURACY: float(acc.mean()),
            om.FILTER_RETRIED_PROMPTS: float(passes.retried),
            om.FILTER_RETRIES_SOLVED: float(passes.retries_solved),
        }
    )
    return batch, metrics
