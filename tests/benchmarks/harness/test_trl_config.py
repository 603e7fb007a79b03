"""benchmarks.harness.trl_config: what both TRL baselines share."""

from __future__ import annotations

from benchmarks.harness.trl_config import completion_text


def testcompletion_text_handles_strings_and_messages() -> None:
    assert completion_text("#### 4") == "#### 4"
    assert completion_text([{"role": "assistant", "content": "#### 4"}]) == "#### 4"
    blocks = [{"role": "assistant", "content": [{"type": "text", "text": "so "}, {"type": "text", "text": "#### 4"}]}]
    assert completion_text(blocks) == "so #### 4"
