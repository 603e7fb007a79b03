"""Waiting on role actors' answers, with errors that name the actor and the phase.

Every call into a role ends in :func:`call`: the driver's into every role, and a rollout replica's into the tools
role (:mod:`roles.tool_client`). It takes the refs in the order they finish, and turns a dead, hung or failing actor
into a :class:`RoleFailedError` naming it, whether its process is gone (Ray may restart it) or Ray's memory monitor
killed it. A tools actor that failed under a rollout's call is named as itself, not as the rollout that called it,
so the driver restarts the right actor.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ray


class RoleFailedError(RuntimeError):
    """A role's actor died or raised; the message names the actor and the phase.

    ``actor`` is the actor's name (``rollout-0``: :func:`placement.plan.actor_name`), ``role`` its role (a plain
    string's role is the string itself), ``died`` whether its process is
    gone (Ray may restart it) rather than the call raising, ``oom`` whether Ray's memory monitor killed it,
    ``hung`` whether it is alive but gave no answer within the call's time bound.
    """

    def __init__(
        self, message: str, actor: str = "", died: bool = False, oom: bool = False, hung: bool = False
    ) -> None:
        super().__init__(message)
        self.actor = actor
        self.role = getattr(actor, "role", actor)
        self.died = died
        self.oom = oom
        self.hung = hung


def call(
    names: Sequence[str],
    refs: Sequence[ray.ObjectRef],
    phase: str,
    timeout_s: float | None = None,
    bound: str = "trainer.role_call_timeout_s",
) -> list[Any]:
    """``ray.get`` the refs, in the order they finish; a dead or failing actor becomes a :class:`RoleFailedError`
    naming it as soon as its ref resolves, and one that has not answered ``timeout_s`` seconds after the wait began
    a hung one (``timeout_s`` None: no bound; ``bound`` names the setting it comes from). Waiting on the refs
    together matters for a learner of several hosts: when one host stops and another's watchdog ends its process,
    the failure surfaces while learner-0 still waits on its stopped peer."""
    name_of = dict(zip(refs, names, strict=True))
    results: dict[ray.ObjectRef, Any] = {}
    remaining = list(dict.fromkeys(refs))  # ray.wait takes each ref once
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while remaining:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, remaining = ray.wait(remaining, num_returns=1, timeout=left)
        if not done:
            waiting = ", ".join(f"'{name_of[ref]}'" for ref in remaining)
            raise RoleFailedError(
                f"role {waiting} gave no answer within {bound}={timeout_s:g} s during {phase}: "
                "alive but hung (stopped, deadlocked, or waiting on something that never comes)",
                name_of[remaining[0]],
                hung=True,
            )
        for ref in done:
            results[ref] = _get(name_of[ref], ref, phase)
    return [results[ref] for ref in refs]


def _get(name: str, ref: ray.ObjectRef, phase: str) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.OutOfMemoryError as exc:
        message = f"role '{name}' was killed by Ray's memory monitor during {phase}: the node ran out of memory"
        raise RoleFailedError(message, name, died=True, oom=True) from exc
    except ray.exceptions.RayActorError as exc:
        oom = killed_for_memory(exc)
        how = "was killed for memory" if oom else "died"
        raise RoleFailedError(f"role '{name}' {how} during {phase}: {_first_line(exc)}", name, True, oom) from exc
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, RoleFailedError) and (cause.died or cause.hung):  # an actor the role called failed
            message = f"{cause} (called by '{name}' during {phase})"
            raise RoleFailedError(message, cause.actor, cause.died, cause.oom, cause.hung) from exc
        raise RoleFailedError(f"role '{name}' failed during {phase}: {_last_line(exc)}", name) from exc


def killed_for_memory(exc: BaseException) -> bool:
    """Whether a dead actor's error says Ray's memory monitor killed it (Ray words it "killed ... due to memory
    pressure" / "OutOfMemoryError" / "memory monitor", depending on where the death was noticed)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(marker in text for marker in ("outofmemory", "out of memory", "memory pressure", "memory monitor"))


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__
