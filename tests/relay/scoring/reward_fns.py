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
