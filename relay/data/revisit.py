"""Unsolved prompts revisited in later steps: the zero-pass prompts of a step come back a few steps on.

A prompt none of whose samples is right gives GRPO nothing to reinforce, and the group filter drops it; drawn
again only an epoch later, it may never be learned. ``data.revisit_unsolved`` keeps such prompts in a queue: each
goes in when its group is graded unsolved, waits ``delay`` step draws (the policy moves meanwhile), and then up to
``share`` of a step's prompts are taken from the queue's head before the data order fills the rest. A prompt is
revisited at most ``times`` times in a row; graded solved (on a visit, or served again by the data order while it
waits), it leaves the queue and its visits are forgotten.

The queue's clock is the count of step draws (not training steps), so a pipelined run, whose collect draws ahead of
the update, and an on-policy run revisit the same prompts at the same draws. The state (the clock, the queue, each
prompt's visits) is part of the data cursor a checkpoint stores.

Worked example (``delay=2``, ``times=1``, step batch 4, ``share=0.5``): draw 1 serves a, b, c, d and a is graded
unsolved -> queued, ready at draw 3. Draw 2 serves e..h from the data order. Draw 3 takes a (visit 1) and three of the
data order; a is unsolved again, but its visits are spent: it is not queued again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RevisitQueue:
    """Which unsolved prompts come back, and when (module docstring). Prompts are named by their example uid."""

    share: float
    delay: int
    times: int
    draws: int = 0  # step draws served so far (the queue's clock)
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (ready at draw, uid), in order of readiness
    visits: dict[str, int] = field(default_factory=dict)  # uid -> times it was taken from the queue

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {self.share}")
        if self.delay < 1 or self.times < 1:
            raise ValueError(f"delay and times must be at least 1, got delay={self.delay}, times={self.times}")

    def take(self, batch_size: int) -> list[str]:
        """Start a step draw of ``batch_size`` prompts: the uids to revisit in it (at most ``share`` of it, rounded
        down, those ready at this draw, oldest first), each counted as a visit.

        >>> q = RevisitQueue(share=0.5, delay=1, times=2, waiting=[(1, "a"), (1, "b"), (1, "c"), (5, "d")])
        >>> q.take(4), q.waiting, q.visits
        (['a', 'b'], [(1, 'c'), (5, 'd')], {'a': 1, 'b': 1})
        """
        self.draws += 1
        cap = math.floor(self.share * batch_size)
        ready = [uid for at, uid in self.waiting[:cap] if at <= self.draws]
        self.waiting = self.waiting[len(ready) :]
        for uid in ready:
            self.visits[uid] = self.visits.get(uid, 0) + 1
        return ready

    def observe(self, unsolved: Iterable[str], solved: Iterable[str]) -> None:
        """The grades of prompts drawn since the last draw: ``unsolved`` ones are queued (ready ``delay`` draws
        on) unless already waiting or out of visits; ``solved`` ones leave the queue and forget their visits.

        >>> q = RevisitQueue(share=0.5, delay=2, times=1, draws=3, waiting=[(4, "c")], visits={"b": 1})
        >>> q.observe(["a", "b"], ["c"]); q.waiting
        [(5, 'a')]
        """
        solved = set(solved)
        for uid in solved:
            self.visits.pop(uid, None)
        self.waiting = [(at, uid) for at, uid in self.waiting if uid not in solved]
        queued = {uid for _, uid in self.waiting}
        for uid in unsolved:
            if uid not in queued and self.visits.get(uid, 0) < self.times:
                self.waiting.append((self.draws + self.delay, uid))
                queued.add(uid)

    def state_dict(self) -> dict[str, Any]:
        """A copy of the clock, the queue and the visits (JSON-ready)."""
        return {"draws": self.draws, "waiting": [[at, uid] for at, uid in self.waiting], "visits": dict(self.visits)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.draws = int(state["draws"])
        self.waiting = [(int(at), str(uid)) for at, uid in state["waiting"]]
        self.visits = {str(uid): int(n) for uid, n in state["visits"].items()}
