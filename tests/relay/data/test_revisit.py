"""Tests for relay.data.revisit and the batcher that serves its prompts: which unsolved prompts come back, when, how
often, and a cursor that resumes the same draws."""

from __future__ import annotations

import json

import pytest

from relay.data import Example, PromptBatcher
from relay.data.revisit import RevisitQueue


def _examples(n: int) -> list[Example]:
    return [Example(uid=f"x-{i}", question=f"q{i}", ground_truth=str(i)) for i in range(n)]


def _uids(batch: list[Example]) -> list[str]:
    return [ex.uid for ex in batch]


def test_the_worked_example_of_the_module() -> None:
    """delay 2, times 1, batch 4, share 0.5: a is unsolved at draw 1, comes back at draw 3, and not again."""
    queue = RevisitQueue(share=0.5, delay=2, times=1)
    assert queue.take(4) == []  # draw 1
    queue.observe(["a"], ["b", "c", "d"])
    assert queue.take(4) == []  # draw 2: a waits
    queue.observe([], ["e", "f", "g", "h"])
    assert queue.take(4) == ["a"]  # draw 3
    queue.observe(["a"], ["i", "j", "k"])
    assert queue.waiting == [] and queue.visits == {"a": 1}  # its one visit is spent
    queue.observe([], ["a"])  # served by the data order later and solved: its visits are forgotten
    assert queue.visits == {}


def test_at_most_the_share_of_a_draw_rounded_down_oldest_first() -> None:
    queue = RevisitQueue(share=0.3, delay=1, times=3)
    queue.take(8)
    queue.observe(["a", "b", "c", "d"], [])
    assert queue.take(8) == ["a", "b"]  # floor(0.3 * 8) = 2
    assert queue.take(8) == ["c", "d"]
    assert queue.take(3) == []  # floor(0.9) = 0: nothing, even with prompts ready
    assert RevisitQueue(share=0.3, delay=1, times=3).take(3) == []


def test_a_prompt_is_queued_once_and_leaves_when_solved() -> None:
    queue = RevisitQueue(share=1.0, delay=3, times=2)
    queue.take(4)
    queue.observe(["a", "a", "b"], [])
    queue.observe(["a"], [])  # already waiting: not queued twice
    assert queue.waiting == [(4, "a"), (4, "b")]
    queue.observe([], ["b"])  # the data order served b again and it was solved
    assert queue.waiting == [(4, "a")]


def test_newest_first_takes_the_latest_failures_and_the_capacity_drops_the_earliest() -> None:
    queue = RevisitQueue(share=0.5, delay=1, times=2, newest_first=True, capacity=3)
    queue.take(4)  # draw 1
    queue.observe(["a", "b"], [])  # ready at draw 2
    queue.take(4)  # draw 2: takes b, a (newest first)
    queue.observe(["c", "d", "e", "f"], [])  # ready at draw 3; past capacity 3, c (queued earliest) leaves
    assert queue.waiting == [(3, "d"), (3, "e"), (3, "f")]
    assert queue.take(4) == ["f", "e"] and queue.waiting == [(3, "d")]
    oldest = RevisitQueue(share=0.5, delay=1, times=2, waiting=[(1, "d"), (1, "e"), (1, "f")])
    assert oldest.take(4) == ["d", "e"]


def test_revisits_solved_counts_the_latest_draws_revisits_graded_solved() -> None:
    queue = RevisitQueue(share=1.0, delay=1, times=2, waiting=[(1, "a"), (1, "b"), (1, "c")])
    assert queue.take(4) == ["a", "b", "c"] and queue.solved_on_visit == 0
    queue.observe(["b"], ["a", "x"])  # the first pass: a solved on its visit, x is new
    queue.observe([], ["c"])  # a later pass of the same step counts too
    assert queue.solved_on_visit == 2
    queue.take(4)  # the next draw starts a new count
    assert queue.taken == ["b"] and queue.solved_on_visit == 0


@pytest.mark.parametrize("bad", [{"share": 0.0}, {"share": 1.5}, {"delay": 0}, {"times": 0}, {"capacity": -1}])
def test_settings_out_of_range_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="must be"):
        RevisitQueue(**{"share": 0.5, "delay": 1, "times": 1, **bad})


def test_a_step_draw_starts_with_the_ready_prompts_and_an_extra_pass_reads_the_data_order() -> None:
    examples = _examples(20)
    plain = PromptBatcher(examples, batch_size=4, seed=3)
    batcher = PromptBatcher(examples, batch_size=4, seed=3, revisit=RevisitQueue(share=0.5, delay=1, times=2))
    first = batcher.next_batch()
    assert _uids(first) == _uids(plain.next_batch()) and batcher.revisited == 0
    batcher.observe(_uids(first)[:3], _uids(first)[3:])
    assert _uids(batcher.next_batch(5)) == _uids(plain.next_batch(5))  # an extra pass: no revisits
    second = batcher.next_batch()
    assert _uids(second) == _uids(first)[:2] + _uids(plain.next_batch(2))  # 2 revisited, 2 of the data order
    assert batcher.revisited == 2 and batcher.revisit.waiting == [(2, _uids(first)[2])]


def test_a_resumed_batcher_draws_what_the_uninterrupted_one_draws() -> None:
    """The queue travels in the cursor (as JSON, the way a checkpoint stores it)."""

    def batcher() -> PromptBatcher:
        return PromptBatcher(_examples(11), batch_size=4, seed=5, revisit=RevisitQueue(share=0.5, delay=2, times=2))

    def step(b: PromptBatcher) -> tuple[list[str], int]:
        drawn = _uids(b.next_batch())
        b.observe([uid for uid in drawn if int(uid[2:]) % 3 == 0], [uid for uid in drawn if int(uid[2:]) % 3])
        return drawn, b.revisited

    whole, first = batcher(), batcher()
    reference = [step(whole) for _ in range(12)]
    head = [step(first) for _ in range(5)]
    resumed = batcher()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert head + [step(resumed) for _ in range(7)] == reference
    assert sum(revisited for _, revisited in reference) >= 4  # the draws did revisit


def test_a_cursor_saved_with_another_revisit_setting_is_refused() -> None:
    with_queue = PromptBatcher(_examples(8), 4, 0, RevisitQueue(share=0.5, delay=1, times=1)).state_dict()
    with pytest.raises(ValueError, match="data.revisit_unsolved.enable=true"):
        PromptBatcher(_examples(8), 4, 0).load_state_dict(with_queue)
    with pytest.raises(ValueError, match="data.revisit_unsolved.enable=false"):
        without_queue = PromptBatcher(_examples(8), 4, 0).state_dict()
        PromptBatcher(_examples(8), 4, 0, RevisitQueue(0.5, 1, 1)).load_state_dict(without_queue)
