"""Unsolved prompts revisited in later steps: the zero-pass prompts of a step come back a few steps on.

A prompt none of whose samples is right gives GRPO nothing to reinforce, and the group filter drops it; drawn
again only an epoch later, it may never be learned. ``data.revisit_unsolved`` keeps such prompts in a queue: each
goes in when its group is graded unsolved, waits ``delay`` step draws (the policy moves meanwhile), and then up to
``share`` of a step's prompts are taken from the queue's head before the data order fills the rest. A prompt is
revisited at most ``times`` times in a row; graded solved (on a visit, or served again by the data order while it
waits), it leaves the queue and its visits are forgotten.

Two settings change which prompts come back. ``newest_first`` takes the ready prompts queued last rather than first:
a prompt that just failed the current policy, rather than one that failed a policy many steps older (early in a run
nearly every prompt fails on format alone, and oldest-first serves those for a long time). ``capacity`` bounds the
queue: past it, the prompts queued earliest leave it (0: no bound).

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
    newest_first: bool = False  # take the ready prompts queued last (else first)
    capacity: int = 0  # the most prompts waiting; past it the earliest queued leave (0: no bound)
    draws: int = 0  # step draws served so far (the queue's clock)
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (ready at draw, uid), in order of readiness
    visits: dict[str, int] = field(default_factory=dict)  # uid -> times it was taken from the queue
    taken: list[str] = field(default_factory=list)  # the uids the latest draw took
    solved_on_visit: int = 0  # of ``taken``, those graded solved since

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {self.share}")
        if self.delay < 1 or self.times < 1:
            raise ValueError(f"delay and times must be at least 1, got delay={self.delay}, times={self.times}")
        if self.capacity < 0:
            raise ValueError(f"capacity must be at least 0 (0: no bound), got {self.capacity}")

    def take(self, batch_size: int) -> list[str]:
        """Start a step draw of ``batch_size`` prompts: the uids to revisit in it (at most ``share`` of it, rounded
        down, of those ready at this draw: the earliest queued first, or the latest with ``newest_first``), each
        counted as a visit.

        >>> q = RevisitQueue(share=0.5, delay=1, times=2, waiting=[(1, "a"), (1, "b"), (1, "c"), (5, "d")])
        >>> q.take(4), q.waiting, q.visits
        (['a', 'b'], [(1, 'c'), (5, 'd')], {'a': 1, 'b': 1})
        >>> q = RevisitQueue(share=0.5, delay=1, times=2, newest_first=True, waiting=[(1, "a"), (1, "b"), (1, "c")])
        >>> q.take(4), q.waiting
        (['c', 'b'], [(1, 'a')])
        """
        self.draws += 1
        cap = math.floor(self.share * batch_size)
        ready = [uid for at, uid in self.waiting if at <= self.draws]
        chosen = ready[::-1][:cap] if self.newest_first else ready[:cap]
        picked = set(chosen)
        self.waiting = [(at, uid) for at, uid in self.waiting if uid not in picked]
        for uid in chosen:
            self.visits[uid] = self.visits.get(uid, 0) + 1
        self.taken, self.solved_on_visit = chosen, 0
        return chosen

    def observe(self, unsolved: Iterable[str], solved: Iterable[str]) -> None:
        """The grades of prompts drawn since the last draw: ``unsolved`` ones are queued (ready ``delay`` draws
        on) unless already waiting or out of visits; ``solved`` ones leave the queue and forget their visits. Past
        ``capacity``, the earliest queued leave.

        >>> q = RevisitQueue(share=0.5, delay=2, times=1, draws=3, waiting=[(4, "c")], visits={"b": 1})
        >>> q.observe(["a", "b"], ["c"]); q.waiting
        [(5, 'a')]
        >>> q = RevisitQueue(share=0.5, delay=2, times=1, capacity=2, draws=3, waiting=[(4, "c"), (5, "d")])
        >>> q.observe(["a"], []); q.waiting
        [(5, 'd'), (5, 'a')]
        """
        solved = set(solved)
        self.solved_on_visit += len(solved.intersection(self.taken))
        for uid in solved:
            self.visits.pop(uid, None)
        self.waiting = [(at, uid) for at, uid in self.waiting if uid not in solved]
        queued = {uid for _, uid in self.waiting}
        for uid in unsolved:
            if uid not in queued and self.visits.get(uid, 0) < self.times:
                self.waiting.append((self.draws + self.delay, uid))
                queued.add(uid)
        if self.capacity:
            self.waiting = self.waiting[-self.capacity :]

    def state_dict(self) -> dict[str, Any]:
        """A copy of the clock, the queue and the visits (JSON-ready)."""
        return {"draws": self.draws, "waiting": [[at, uid] for at, uid in self.waiting], "visits": dict(self.visits)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.draws = int(state["draws"])
        self.waiting = [(int(at), str(uid)) for at, uid in state["waiting"]]
        self.visits = {str(uid): int(n) for uid, n in state["visits"].items()}
