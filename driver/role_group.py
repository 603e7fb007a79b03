"""The running roles: one :class:`RoleGroup` per role (its actors, by rank), and :class:`Roles`, the groups with
the weights they should hold.

A group is how the driver talks to a role (in the spirit of verl's worker groups). It owns its actors' names
(``rollout-0``: :func:`placement.plan.actor_name` is the one place they are built), shares a batch out over its actors
(consecutive row shares, sizes differing by at most one) and stacks the answers back in order, records each
call's busy span on the run's timeline, checks that answers came from the synced weights, and sends a call
again after Ray restarted an actor that died or hung in it (:mod:`driver.role_restart`). A role's own calls are
methods of its group's kind (:mod:`driver.role_calls`), the kind its declaration names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.actor import ActorHandle
from ray.util.placement_group import PlacementGroup

from driver.role_restart import RestartLedger, kill_hung, wait_restarted
from driver.timing import PhaseTimer
from placement.plan import PlacementPlan, actor_name
from relay.data_proto import DataProto
from relay.metrics import system as sm
from relay.role_declarations import ROLE_DECLARATIONS, declaration, holds_weights, resolve
from relay.rollout_batch import split_rows, stack_rows
from relay.run import timeline
from relay.scoring.reward_sources import RewardSource
from relay.shared_weights import SharedWeights
from roles.role_call import RoleFailedError, call

# What a sync hands the engines: an object-store ref of the weights, or a handle of the learner's memory file.
Weights = ray.ObjectRef | SharedWeights
Merge = Callable[[list[DataProto]], DataProto]


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

    def dispatch(self, method: str, data: DataProto, *args: Any, step: int = 0) -> Pending:
        """Send ``data`` to ``method`` as the role's declaration shares a batch out (``dispatch``): ``rows`` gives
        each actor its consecutive share (:meth:`submit`), ``first`` gives rank 0 the whole batch
        (:meth:`submit_to_first`); a ``caller`` role is called by another role's actors, never by the driver."""
        mode = declaration(self.role).dispatch
        if mode == "rows":
            return self.submit(method, data, *args, step=step)
        if mode == "first":
            return self.submit_to_first(method, data, *args, step=step)
        raise TypeError(f"role {self.role!r} is called by {declaration(self.role).called_by}'s actors, not the driver")

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
        self, pending: Pending, phase: str, span: str | None = None, merge: Merge | None = None
    ) -> DataProto:
        """:meth:`rows` from the synced weights: when a rank restarted between two calls and answered from older
        weights (``meta_info`` at the role's declared ``version_key``), the group gets the synced weights and sends
        the call again; the rows' metrics then count it (the declared ``stale_metric``, ``recovery/stale_*``)."""
        declared = declaration(self.role)
        out = self.rows(pending, phase, span, merge)
        version = int(out.meta_info.get(declared.version_key, self._roles.weights.version))
        if version == self._roles.weights.version:
            return out
        self.resync()
        pending = Pending(pending.resend(), pending.resend, time.time(), pending.step)
        out = self.rows(pending, phase, span, merge)
        out.meta_info.setdefault("metrics", {})[declared.stale_metric] = 1.0
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
        """Whether this role loads the learner's weights at a sync (its declared ``weights``): every rollout
        replica, and the actor_ref ranks only when they hold an actor copy (the reference model never changes)."""
        return holds_weights(self.role, self._roles.actor_copy)

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


class GroupOf:
    """``Roles.rollout``: the group of one role, of the kind its declaration names (:mod:`driver.role_calls`), made on
    first use."""

    def __init__(self, role: str) -> None:
        self.role = role

    def __get__(self, roles: Roles | None, owner: type | None = None) -> Any:
        if roles is None:  # read on the class
            raise AttributeError(f"Roles.{self.role} is a running run's group; read it on a Roles instance")
        return roles.group(self.role)


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
    # What a response is trained on (reward.sources): the reward role's grade alone unless the config says more.
    reward_sources: tuple[RewardSource, ...] = (RewardSource(),)

    def group(self, role: str) -> RoleGroup:
        """``role``'s group (an empty one when the plan has none of its actors)."""
        if role not in self.groups:
            self.groups[role] = resolve(declaration(role).group)(role, self)  # its declared kind
        return self.groups[role]

    # Each role's group; actor_ref is empty when the plan has none (nothing reads its log-probs), and learner rank 0
    # publishes the weights.
    rollout = GroupOf("rollout")
    actor_ref = GroupOf("actor_ref")
    reward = GroupOf("reward")
    reward_model = GroupOf("reward_model")  # empty unless reward_model.enable
    tools = GroupOf("tools")  # called by the rollout replicas' agent loops (roles/tool_client.py)
    learner = GroupOf("learner")

    def handles(self) -> dict[str, ActorHandle]:
        """Every actor by its name, e.g. ``{"rollout-0": ..., "learner-0": ...}``."""
        return {name: h for g in self.groups.values() for name, h in zip(g.names, g.handles, strict=True)}

    def weight_holder_names(self) -> list[str]:
        """The actors that load the learner's weights at a sync."""
        return [name for g in self.weight_groups() if g.holds_weights() for name in g.names]

    def weight_groups(self) -> list[RoleGroup]:
        """The groups of the roles that may load the learner's weights (declared ``weights`` not ``none``), in
        declaration order."""
        return [self.group(r.name) for r in ROLE_DECLARATIONS if r.weights != "none"]

    def recover(self, exc: RoleFailedError, attempt: int) -> int:
        """After a failed call: when ``exc`` is a restartable role's death or hang and ``attempt`` (the restarts made
        for this call so far) < ``trainer.role_restarts``, wait for Ray to restart the actor (a hung one is killed
        first), give it the synced weights and return the restarts made (the caller sends the call again); else 0
        (the caller raises). An actor that dies again while it is given the weights (inside this recovery) is
        restarted again from the same budget: e.g. with ``trainer.role_restarts: 2``, a rollout killed in its
        generation and again in its resync is restarted twice and the call sent again; the answer is 2."""
        restartable = declaration(exc.role).restart == "relay"
        if not (exc.died or exc.hung) or not restartable or attempt >= self.restart.attempts:
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
            loads = [(g, g.submit_load(weights, version)) for g in self.weight_groups()]
            seconds = {declaration(g.role).load_metric: g.loaded(pending) for g, pending in loads}
        if self.weights.ref is not weights:
            self.release(self.weights.ref)
        self.weights = SyncedWeights(weights, version)
        return {**seconds, **timer.metrics()}

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
