"""Checks of ``reward_model`` and ``reward.sources`` (:func:`relay.config.validate.validate` runs them): the
checkpoint is a one-label sequence classifier (``classifier``) or a causal LM with a rubric it can answer
(``judge``), the sources name what runs and weigh something. Each problem names the key, the value and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from relay.config.checks import at_least, choice, positive
from relay.models.paths import ModelPathError, reward_model_dir
from relay.scoring.judge import SCORES, answer_token_ids, rubric_problem
from relay.scoring.reward_model import classifier_problem
from relay.scoring.reward_sources import sources_problems

KINDS = ("classifier", "judge")
JUDGE_ENGINES = ("vllm", "hf")


def check_reward_model(p: list[str], cfg: Any) -> None:
    """``reward_model`` (when enabled) and ``reward.sources``."""
    rm = cfg.reward_model
    entries = [dict(e) for e in cfg.reward.sources]
    p.extend(sources_problems(entries, bool(rm.enable)))
    if not rm.enable:
        return
    choice(p, "reward_model.kind", rm.kind, KINDS)
    at_least(p, "reward_model.micro_batch_size", rm.micro_batch_size, 1)
    at_least(p, "reward_model.max_length", rm.max_length, 16)
    at_least(p, "reward_model.gpus", rm.gpus, 0)
    if not rm.path:
        p.append(f"reward_model.path is empty but reward_model.enable=true: set it to the {rm.kind}'s directory")
        return
    try:
        config = reward_model_dir(cfg) / "config.json"
    except ModelPathError as exc:
        p.append(str(exc))
        return
    key = f"reward_model.path={rm.path}"
    if rm.kind == "classifier":
        problem = classifier_problem(json.loads(config.read_text()), key)
        p.extend([problem] if problem else [])
    elif rm.kind == "judge":
        check_judge(p, rm, config, key)


def check_judge(p: list[str], rm: Any, config_path: Path, key: str) -> None:
    """A judge: a causal LM, an engine that serves it, a rubric with ``{response}``, a score it can give."""
    judge, config = rm.judge, json.loads(config_path.read_text())
    architectures = list(config.get("architectures") or [])
    if not any(str(a).endswith("ForCausalLM") for a in architectures):
        p.append(
            f"{key}: the checkpoint's architectures are {architectures or 'not given'}, not a *ForCausalLM model; "
            "reward_model.kind=judge generates its answer (a classifier is reward_model.kind=classifier)"
        )
        return
    choice(p, "reward_model.engine", rm.engine, JUDGE_ENGINES)
    choice(p, "reward_model.judge.score", judge.score, SCORES)
    problem = rubric_problem(str(judge.rubric), "reward_model.judge.rubric")
    p.extend([problem] if problem else [])
    if judge.score == "number":
        positive(p, "reward_model.judge.number_max", judge.number_max)
        at_least(p, "reward_model.judge.max_new_tokens", judge.max_new_tokens, 1)
    elif judge.score == "yes_probability":
        from transformers import AutoTokenizer

        try:
            answer_token_ids(AutoTokenizer.from_pretrained(str(config_path.parent)), str(judge.yes), str(judge.no))
        except ValueError as exc:
            p.append(str(exc))
