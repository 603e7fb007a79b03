"""The driver's check of a user reward function (``reward.mode=function``), run before Ray starts."""

from __future__ import annotations

from pathlib import Path

from relay.config import RelayConfig


def check_user_reward(cfg: RelayConfig, model_path: Path) -> str:
    """Import ``reward.function`` and score the first training example with it (a correct, well-formed
    response built from its ground truth); returns a one-line report.

    Raises :class:`relay.scoring.user_function.RewardFunctionError` (import, call or result problems),
    :class:`relay.data.DatasetError` or FileNotFoundError (the training data), all of them config errors."""
    from transformers import AutoTokenizer

    from relay.scoring.user_function import check_reward_function
    from relay.tasks.run_tasks import RunTasks

    example = RunTasks.from_config(cfg.data).read(cfg.data.train_path, "train")[0]
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    score = check_reward_function(
        cfg.reward.function,
        dict(cfg.reward.function_kwargs),
        example.question,
        example.ground_truth,
        lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
    )
    return f"reward.function={cfg.reward.function} checked on one example ({example.uid}): score {score:g}"
