"""Turn values from the driver (numpy scalars and arrays, paths, times) into plain JSON values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import PurePath
from typing import Any


def to_jsonable(value: Any, *, keep_nonfinite: bool = False) -> Any:
    """A JSON-safe copy of ``value``; never raises.

    numpy scalars become Python numbers and arrays lists, paths strings, datetimes ISO strings,
    tuples and sets lists, mapping keys strings; anything else unknown becomes its ``repr``. Non-finite
    floats become the strings ``"nan"``, ``"inf"``, ``"-inf"`` (strict JSON), unless ``keep_nonfinite``,
    which keeps them as floats (``json.dumps`` writes ``NaN``, as ``metrics.jsonl`` always has).

    >>> import numpy as np
    >>> to_jsonable({"loss": np.float32(0.5), "ids": np.arange(3), 1: float("nan")})
    {'loss': 0.5, 'ids': [0, 1, 2], '1': 'nan'}
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _float(value, keep_nonfinite)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, keep_nonfinite=keep_nonfinite) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, keep_nonfinite=keep_nonfinite) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return to_jsonable(value.value, keep_nonfinite=keep_nonfinite)
    # numpy (and jax, torch) scalars and arrays, without importing them.
    if hasattr(value, "tolist") and callable(value.tolist):
        try:
            return to_jsonable(value.tolist(), keep_nonfinite=keep_nonfinite)
        except Exception:  # a log line must never fail
            pass
    if hasattr(value, "item") and callable(value.item):
        try:
            return to_jsonable(value.item(), keep_nonfinite=keep_nonfinite)
        except Exception:
            pass
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def _float(value: float, keep_nonfinite: bool) -> float | str:
    if math.isfinite(value) or keep_nonfinite:
        return float(value)
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def finite_number(value: Any) -> float | None:
    """A finite float, or None for missing, text, boolean, non-numeric or non-finite values.

    Example: ``finite_number(np.float32(0.5)) == 0.5``; ``finite_number("nan")`` and ``finite_number(True)``
    are None.
    """
    if value is None or isinstance(value, str | bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
