"""One multi-turn response: the model's tokens and the tool results between them, with their loss mask.

The token ids are kept exactly as the engine produced them and the tool results as they were tokenised when
appended: the conversation is never re-tokenised, so the learner trains on the very ids that were sampled.

Example: a model turn ``[a, b, c]`` that ends in a tool call, a result ``[r, s]``, then a turn ``[d, EOS]`` give
``token_ids = [a, b, c, r, s, d, EOS]``, ``loss_mask = [1, 1, 1, 0, 0, 1, 1]`` and ``log_probs`` 0 on ``r, s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relay.engines.base import Generation

LIVE, EOS, LENGTH, TURN_LIMIT = "", "eos", "length", "turn_limit"


@dataclass
class Trajectory:
    """A response being built turn by turn; ``ended`` says why it stopped (``""`` while it goes on)."""

    prompt: list[int]
    token_ids: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turns: int = 0  # model turns
    tool_calls: int = 0
    tool_errors: int = 0  # malformed calls, unknown tools, a tool's own error
    tool_timeouts: int = 0
    tool_tokens: int = 0
    tool_seconds: list[float] = field(default_factory=list)
    ended: str = LIVE

    def context(self) -> list[int]:
        """The next turn's prompt: the original prompt and everything appended since, token for token."""
        return self.prompt + self.token_ids

    def room(self, max_response_length: int) -> int:
        """Response tokens still allowed (model and tool tokens together count against the budget)."""
        return max_response_length - len(self.token_ids)

    def add_model_turn(self, token_ids: list[int], log_probs: list[float]) -> None:
        self.token_ids += token_ids
        self.log_probs += log_probs
        self.loss_mask += [1] * len(token_ids)
        self.turns += 1

    def add_tool_result(self, token_ids: list[int], status: str, seconds: float | None) -> None:
        """A tool's result tokens (not trained on, no log-probs) and the call's outcome."""
        self.token_ids += token_ids
        self.log_probs += [0.0] * len(token_ids)
        self.loss_mask += [0] * len(token_ids)
        self.tool_tokens += len(token_ids)
        self.tool_calls += 1
        self.tool_errors += status == "error"
        self.tool_timeouts += status == "timeout"
        if seconds is not None:
            self.tool_seconds.append(seconds)

    def generation(self) -> Generation:
        """The trajectory as one engine-style response: ``finished`` when it ended with EOS."""
        return Generation(list(self.token_ids), list(self.log_probs), self.ended == EOS, list(self.loss_mask))
