"""The running roles: one :class:`RoleGroup` per role (its actors, by rank), and :class:`Roles`, the groups with
the weights they should hold.

A group is how the driver talks to a role (in the spirit of verl's worker groups). It owns its actors' names
(``rollout-0``: :func:`placement.plan.actor_name` is the one place they are built), shares a batch out over its actors
(consecutive row shares, sizes differing by at most one) and stacks the answers back in order, records each
call's busy span on the run's timeline, checks that answers came from the synced weights, and sends a call
again after Ray restarted an actor that died or hung in it (:mod:`driver.role_restart`). A role's own calls are
methods of its group's kind (:class:`RolloutGroup.generate`, :class:`LearnerGroup.update`, ...): each sends the role
only the fields it reads and returns what the role made with the metrics it adds, its own wall time among them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import ray
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup

from driver.role_restart import RestartLedger, kill_hung, wait_restarted
from driver.timing import PhaseTimer
from placement.plan import PlacementPlan, actor_name
from relay.data_proto import DataProto
from relay.evaluation.generation import grade_inputs
from relay.learner.inputs import LEARNER_INPUTS
from relay.metrics import policy as pm
from relay.metrics import system as sm
from relay.rank_metrics import merge_rank_metrics
from relay.rollout_batch import merge_rollout_parts, pop_metrics, split_rows, stack_rows
from relay.run import timeline
from relay.shared_weights import SharedWeights
from roles.role_call import RoleFailedError, call

# What a sync hands the engines: an object-store ref of the weights, or a handle of the learner's memory file.
Weights = ray.ObjectRef | SharedWeights
RESTARTABLE = ("rollout", "actor_ref", "reward", "tools")
Merge = Callable[[list[DataProto]], DataProto]
# The metric counting answers that came from weights older than the last sync, by role.
STALE_METRICS = {"rollout": sm.RECOVERY_STALE_ROLLOUTS, "actor_ref": sm.RECOVERY_STALE_ACTOR_COPIES}
# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
# Tensors the reward role gets: grading reads text; a user function may read the tokens too.
REWARD_TENSORS = {"function": ["responses", "response_mask", "response_length"]}


@dataclass(frozen=True)
class Pending:
    """A group call in flight: its refs (one per actor called), how to send it again, when it was sent."""

    refs: list[ray.ObjectRef]
    resend: Callable[[], list[ray.ObjectRef]]
    sent: float
    step: int = 0


@dataclass(frozen=True)
class RestartPolicy:
    """``trainer.role_restarts``, ``trainer.role_restart_timeout_s`` and ``trainer.role_call_timeout_s``."""

    attempts: int = 0
    timeout_s: float = 600.0
    call_timeout_s: float | None = None


@dataclass
class SyncedWeights:
    """The weights every rollout replica and actor copy should hold (``ref`` None: the initial checkpoint)."""

    ref: Weights | None = None
    version: int = 0


class RoleGroup:
    """One role's actors, by rank (see the module docstring)."""

    def __init__(self, role: str, roles: Roles) -> None:
        self.role = role
        self.handles: list[ActorHandle] = []
        self._roles = roles

    @property
    def names(self) -> list[str]:
        return [actor_name(self.role, rank) for rank in range(len(self.handles))]

    def __len__(self) -> int:
        return len(self.handles)

    def __iter__(self) -> Iterator[ActorHandle]:
        return iter(self.handles)

    def __getitem__(self, rank: int) -> ActorHandle:
        return self.handles[rank]

    def submit(
        self,
        method: str,
        data: DataProto,
        *args: Any,
        step: int = 0,
        share_args: Callable[[slice], tuple] | None = None,
    ) -> Pending:
        """Call ``method(share, *args)`` on each actor with its consecutive share of ``data``'s rows (fewer rows than
        actors: some idle; no actors: no calls); ``share_args(rows)`` adds arguments that depend on the share."""

        def send() -> list[ray.ObjectRef]:
            shares = split_rows(len(data), len(self.handles)) if self.handles else []
            extra = share_args or (lambda _: ())
            calls = zip(self.handles, shares, strict=False)
            return [getattr(h, method).remote(data[s], *args, *extra(s)) for h, s in calls]

        return Pending(send(), send, time.time(), step)

    def submit_each(self, method: str, *args: Any, step: int = 0) -> Pending:
        """Call ``method(*args)`` on every actor."""

        def send() -> list[ray.ObjectRef]:
            return [getattr(h, method).remote(*args) for h in self.handles]

        return Pending(send(), send, time.time(), step)

    def submit_to_first(self, method: str, *args: Any, step: int = 0) -> Pending:
        """Call ``method(*args)`` on the rank-0 actor only (the reward role's grading, learner-0's publishing)."""

        def send() -> list[ray.ObjectRef]:
            return [getattr(self.handles[0], method).remote(*args)]

        return Pending(send(), send, time.time(), step)

    def answers(self, pending: Pending, phase: str, span: str | None = None) -> list[Any]:
        """Each called actor's answer, in rank order. A call whose actor (or a tools actor it called) died is sent
        again once Ray restarted that actor and it got the synced weights (:meth:`Roles.recover`). With ``span``,
        the call's busy time goes on the timeline: from its send to the compute time the role reported
        (``timing/<role>_compute``), else to now."""
        restarts = 0  # made for this call: trainer.role_restarts bounds them
        while True:
            try:
                out = call(self.names[: len(pending.refs)], pending.refs, phase, self._roles.restart.call_timeout_s)
                break
            except RoleFailedError as exc:
                made = self._roles.recover(exc, restarts)
                if not made:
                    raise
                restarts += made
                pending = Pending(pending.resend(), pending.resend, pending.sent, pending.step)
        if span is not None:
            self._record(span, pending, out)
        return out

    def rows(self, pending: Pending, phase: str, span: str | None = None, merge: Merge | None = None) -> DataProto:
        """The actors' row shares as one batch, in rank order: :func:`stack_rows` unless ``merge`` is given (the
        rollout's parts are widened to one width: :func:`relay.rollout_batch.merge_rollout_parts`)."""
        return (merge or stack_rows)(self.answers(pending, phase, span))

    def current_rows(
        self, pending: Pending, phase: str, version_key: str, span: str | None = None, merge: Merge | None = None
    ) -> DataProto:
        """:meth:`rows` from the synced weights: when a rank restarted between two calls and answered from older
        weights (``meta_info[version_key]``), the group gets the synced weights and sends the call again; the
        rows' metrics then count it (``recovery/stale_*``)."""
        out = self.rows(pending, phase, span, merge)
        if int(out.meta_info.get(version_key, self._roles.weights.version)) == self._roles.weights.version:
            return out
        self.resync()
        pending = Pending(pending.resend(), pending.resend, time.time(), pending.step)
        out = self.rows(pending, phase, span, merge)
        out.meta_info.setdefault("metrics", {})[STALE_METRICS[self.role]] = 1.0
        return out

    def each(self, method: str, *args: Any, phase: str) -> list[Any]:
        """Call ``method(*args)`` on every actor and wait for all."""
        return self.answers(self.submit_each(method, *args), phase)

    def _record(self, span: str, pending: Pending, answers: list[Any]) -> None:
        """The call's busy span: from its send to send + the compute time the role reported (never past now). Roles
        called side by side are gathered one after the other, so the gather time would overstate one."""
        now = time.time()
        reported = [_reported_seconds(a, sm.TIMING_ROLE_COMPUTE.format(role=self.role)) for a in answers]
        busy = max((s for s in reported if s is not None), default=now - pending.sent)
        timeline.record(self.role, span, pending.sent, min(now, pending.sent + busy), pending.step)

    def holds_weights(self) -> bool:
        """Whether this role loads the learner's weights at a sync: every rollout replica, and the actor_ref ranks
        only when they hold an actor copy (the reference model never changes)."""
        return self.role == "rollout" or (self.role == "actor_ref" and self._roles.actor_copy)

    def submit_load(self, weights: Weights, version: int) -> Pending:
        """Every actor starts loading ``weights`` as ``version`` (no call when the role holds no weights)."""
        if not self.holds_weights():
            return Pending([], list, time.time(), version - 1)
        return self.submit_each("load_weights", weights, version, step=version - 1)

    def loaded(self, pending: Pending) -> float:
        """The slowest load's seconds of :meth:`submit_load` (0.0 without calls), on the timeline as
        ``load_weights``."""
        if not pending.refs:
            return 0.0
        busy = max(float(r["seconds"]) for r in self.answers(pending, "weight sync"))
        if busy > 0:
            timeline.record(self.role, "load_weights", pending.sent, pending.sent + busy, pending.step)
        return busy

    def resync(self) -> None:
        """Give the actors the last synced weights (no-op before the first sync and for roles holding none)."""
        synced = self._roles.weights
        if synced.ref is not None and self.holds_weights():
            call(self.names, [h.load_weights.remote(synced.ref, synced.version) for h in self.handles], "resync")


def _reported_seconds(answer: Any, key: str) -> float | None:
    metrics = answer.meta_info.get("metrics", {}) if isinstance(answer, DataProto) else {}
    return float(metrics[key]) if key in metrics else None


class RolloutGroup(RoleGroup):
    """The rollout replicas: a step's samples (and, around an update, the engines' sleep)."""

    def generate(self, prompts: DataProto, step: int, sample_pass: int = 0) -> tuple[DataProto, dict[str, float]]:
        """``prompts`` sampled by every replica (``rollout.n`` rows per prompt), from the synced weights; the
        metrics are ``timing/rollout`` (both tries when the first came from stale weights),
        ``offpolicy/weights_version`` (the weights the rows came from) and the replicas' own."""
        timer = PhaseTimer(step)
        span = f"generate (pass {sample_pass})" if sample_pass else "generate"
        with timer.phase(sm.TIMING_ROLLOUT):
            pending = self.submit("generate", prompts, step, sample_pass, step=step)
            gen = self.current_rows(pending, "rollout", "weights_version", span, merge_rollout_parts)
        for start, end in gen.meta_info.pop("tool_spans", []):  # the tools role's busy time, on its own track
            timeline.record("tools", "calls", start, end, step)
        version = float(gen.meta_info.get("weights_version", 0))
        return gen, {pm.OFFPOLICY_WEIGHTS_VERSION: version, **timer.metrics(), **pop_metrics(gen)}


class ActorRefGroup(RoleGroup):
    """The actor_ref ranks: reference (and old-policy) log-probs of the sampled rows."""

    def submit_log_probs(self, gen: DataProto, step: int) -> Pending:
        """Start the log-prob forward on ``gen``'s rows (no call when the plan has no actor_ref)."""
        data = gen.select(ACTOR_REF_INPUTS, [])
        data.meta_info["step"] = step  # the actor_ref's fault point (relay.faults)
        return self.submit("compute_log_probs", data, step=step)

    def log_probs(self, pending: Pending) -> tuple[DataProto | None, dict[str, float]]:
        """The log-probs of :meth:`submit_log_probs` and the ranks' metrics (None and none without actors), from the
        synced weights when the ranks hold an actor copy."""
        if not pending.refs:
            return None, {}
        rows = self.current_rows(pending, "actor_ref log-probs", "actor_weights_version", "log_probs")
        return rows, pop_metrics(rows)


class RewardGroup(RoleGroup):
    """The reward role: rank 0 grades a whole batch (its grader processes share it out)."""

    def submit_grade(self, gen: DataProto, mode: str, step: int) -> Pending:
        """Start grading ``gen``'s responses; ``mode`` is ``reward.mode`` (a user function gets the tokens too)."""
        reward_input = gen.select(REWARD_TENSORS.get(mode, ["response_length"]), grade_inputs(gen))
        return self.submit_to_first("score", reward_input, step, step=step)

    def grades(self, pending: Pending) -> tuple[DataProto, dict[str, float]]:
        """The answer to :meth:`submit_grade` (``scores``, ``acc``) and the role's metrics; span ``grade``."""
        (graded,) = self.answers(pending, "reward", "grade")
        return graded, pop_metrics(graded)

    def grade(self, gen: DataProto, mode: str, step: int) -> tuple[DataProto, dict[str, float]]:
        """:meth:`submit_grade`, waited for."""
        return self.grades(self.submit_grade(gen, mode, step))


class LearnerGroup(RoleGroup):
    """The learner hosts: one JAX job across them; rank 0 publishes the weights."""

    def update(self, batch: DataProto, step: int, sleep_rollout: bool = False) -> tuple[Weights, dict[str, float]]:
        """The update of ``batch`` on every host (each its share of the rows): the new weights (an object-store ref
        or a memory-file handle) and the learner's metrics with ``timing/update``. With ``sleep_rollout``
        (``rollout.sleep_during_update``) the engines free their memory for the update's length."""
        timer, rollout = PhaseTimer(step), self._roles.rollout
        if sleep_rollout:
            rollout.each("sleep", phase="rollout sleep")
        with timer.phase(sm.TIMING_UPDATE):
            data = batch.select([k for k in LEARNER_INPUTS if k in batch.batch], [])
            data.meta_info["step"] = step  # the learner's fault point (relay.faults)
            outs = self.answers(self.submit("update", data, step=step), "update", "update")
        self._roles.last_updated_step = step
        if sleep_rollout:
            rollout.each("wake_up", phase="rollout wake-up")
        return outs[0][0], {**merge_rank_metrics([metrics for _, metrics in outs]), **timer.metrics()}


G = TypeVar("G", bound=RoleGroup)
GROUP_KINDS: dict[str, type[RoleGroup]] = {
    "rollout": RolloutGroup,
    "actor_ref": ActorRefGroup,
    "reward": RewardGroup,
    "learner": LearnerGroup,
}


class GroupOf(Generic[G]):
    """``Roles.rollout`` and its kind: the group of one role, made on first use."""

    def __init__(self, role: str, kind: type[G]) -> None:
        self.role, self.kind = role, kind

    def __get__(self, roles: Roles | None, owner: type | None = None) -> G:
        if roles is None:  # read on the class
            raise AttributeError(f"Roles.{self.role} is a running run's group; read it on a Roles instance")
        group = roles.group(self.role)
        assert isinstance(group, self.kind)
        return group


@dataclass
class Roles:
    """The running roles: a :class:`RoleGroup` per role, the placement groups they sit in, and the weights every
    rollout replica and actor copy should hold."""

    plan: PlacementPlan
    placement_groups: dict[str, PlacementGroup]
    namespace: str = ""
    # The actor_ref ranks hold an actor copy that follows the learner (algorithm.old_log_prob_source=actor).
    actor_copy: bool = False
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    groups: dict[str, RoleGroup] = field(default_factory=dict)
    weights: SyncedWeights = field(default_factory=SyncedWeights)
    # What each actor's ready() reported, by name ("rollout-0": {...}), and the resolved trainer.weight_sync.
    ready_info: dict[str, dict] = field(default_factory=dict)
    weight_sync: str = "object_store"
    # The role of each actor recovered so far, in order (recovery/restarts counts a step's share), and Ray's
    # restarts against Relay's (recovery/ray_restarts: the ones no failed call showed).
    restarted: list[str] = field(default_factory=list)
    ledger: RestartLedger = field(default_factory=RestartLedger)
    # The last step whose update the learner applied (an emergency checkpoint after it is of the step after).
    last_updated_step: int | None = None

    def group(self, role: str) -> RoleGroup:
        """``role``'s group (an empty one when the plan has none of its actors)."""
        if role not in self.groups:
            self.groups[role] = GROUP_KINDS.get(role, RoleGroup)(role, self)
        return self.groups[role]

    # Each role's group; actor_ref is empty when the plan has none (nothing reads its log-probs), and learner rank 0
    # publishes the weights.
    rollout = GroupOf("rollout", RolloutGroup)
    actor_ref = GroupOf("actor_ref", ActorRefGroup)
    reward = GroupOf("reward", RewardGroup)
    tools = GroupOf("tools", RoleGroup)  # called by the rollout replicas' agent loops (roles/tool_client.py)
    learner = GroupOf("learner", LearnerGroup)

    def handles(self) -> dict[str, ActorHandle]:
        """Every actor by its name, e.g. ``{"rollout-0": ..., "learner-0": ...}``."""
        return {name: h for g in self.groups.values() for name, h in zip(g.names, g.handles, strict=True)}

    def weight_holder_names(self) -> list[str]:
        """The actors that load the learner's weights at a sync."""
        return [name for g in (self.rollout, self.actor_ref) if g.holds_weights() for name in g.names]

    def recover(self, exc: RoleFailedError, attempt: int) -> int:
        """After a failed call: when ``exc`` is a restartable role's death or hang and ``attempt`` (the restarts made
        for this call so far) < ``trainer.role_restarts``, wait for Ray to restart the actor (a hung one is killed
        first), give it the synced weights and return the restarts made (the caller sends the call again); else 0
        (the caller raises). An actor that dies again while it is given the weights (inside this recovery) is
        restarted again from the same budget: e.g. with ``trainer.role_restarts: 2``, a rollout killed in its
        generation and again in its resync is restarted twice and the call sent again; the answer is 2."""
        if not (exc.died or exc.hung) or exc.role not in RESTARTABLE or attempt >= self.restart.attempts:
            return 0
        failed = self.group(exc.role)
        self.ledger.relay_restarting(exc.actor)
        if exc.hung:
            kill_hung(failed[failed.names.index(exc.actor)], self.ready_info.get(exc.actor, {}))
        try:
            ready = wait_restarted(failed.handles, failed.names, self.restart.timeout_s)
        except BaseException:
            self.ledger.relay_restarted(exc.actor, None)
            raise
        self.ready_info.update(zip(failed.names, ready, strict=True))
        self.ledger.relay_restarted(exc.actor, self.ready_info[exc.actor].get("incarnation"))
        self.restarted.append(exc.role)
        try:
            failed.resync()
        except RoleFailedError as again:
            more = self.recover(again, attempt + 1)
            if not more:
                raise
            return 1 + more
        return 1

    def sync(self, weights: Weights, version: int) -> dict[str, float]:
        """Every rollout replica and actor copy loads ``weights`` as ``version``: each role's slowest load and the
        sync's wall time (``timing/sync``). The previous weights are released once no role holds them."""
        timer = PhaseTimer(version - 1)
        with timer.phase(sm.TIMING_SYNC):
            loads = [(g, g.submit_load(weights, version)) for g in (self.rollout, self.actor_ref)]
            rollout, actor = (g.loaded(pending) for g, pending in loads)
        if self.weights.ref is not weights:
            self.release(self.weights.ref)
        self.weights = SyncedWeights(weights, version)
        return {sm.SYNC_ROLLOUT_LOAD_SECONDS: rollout, sm.SYNC_ACTOR_LOAD_SECONDS: actor, **timer.metrics()}

    def drop_synced_weights(self) -> None:
        """Release the last synced weights before an on-policy update: nothing needs them from there on (a role
        restarted during the update gets the new weights in the sync), and the learner's put then reuses their
        object-store pages instead of touching fresh ones in every process that writes or reads them (measured:
        +0.5 GiB RSS per step in the learner and the rollout). The pipeline keeps them: its collect thread may
        still resync a restarted rollout with them."""
        self.release(self.weights.ref)
        self.weights = SyncedWeights(None, self.weights.version)

    def release(self, weights: Weights | None) -> None:
        """Drop weights no role needs any more: a learner memory file is closed by the learner (fire and forget;
        queued before its next call), an object-store ref is freed when the caller drops it."""
        if isinstance(weights, SharedWeights):
            self.learner[0].release_weights.remote(weights)
