"""User reward functions for the tests of ``reward.function`` (imported as ``reward_fns:<name>``)."""

from __future__ import annotations


def exact(data, bonus: float = 0.0):
    """1 + bonus when the response ends with the ground truth, else 0 (a dict per row)."""
    out = []
    for text, truth in zip(data.non_tensor["response_text"], data.non_tensor["ground_truth"], strict=True):
        ok = str(text).strip().endswith(str(truth))
        out.append({"score": float(ok) + bonus, "acc": float(ok)})
    return out


def token_count(data):
    return [float(n) for n in data.batch["response_length"]]


def raises(data):
    raise KeyError("answer")


def too_few(data):
    return []


def not_numbers(data):
    return ["yes"] * len(data)


def a_dict(data):
    return {"score": 1.0}


def needs_kwarg(data, *, scale):
    return [scale] * len(data)


NOT_CALLABLE = 3


# Per-response graders (``reward.grader: reward_fns:<name>``, or ``tests.relay.scoring.reward_fns:<name>``).


def starts_with(response_text, ground_truth, prefix="Answer:"):
    """1 when the response starts with ``prefix`` and the ground truth."""
    return float(response_text.strip().startswith(f"{prefix} {ground_truth}"))


def half_credit(response_text, ground_truth):
    """A dict result: score 0.5 and acc 0 for any response that mentions the ground truth."""
    return {"score": 0.5 * (ground_truth in response_text), "acc": 0.0, "extracted": ground_truth}


def hangs(response_text, ground_truth):
    """Never returns on a response containing 'hang' (the item timer must stop it)."""
    while "hang" in response_text:
        pass
    return 1.0


def not_a_number(response_text, ground_truth):
    return "yes"
