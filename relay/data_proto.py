"""DataProto: the batch that travels between Relay roles.

A DataProto is three dicts that share one leading (batch) dimension:

- ``batch``: named numeric arrays, e.g. ``responses`` [B, R] int32, ``advantages`` [B, R] float32;
- ``non_tensor``: per-sample object arrays, e.g. ``uid``, ``question``, ``ground_truth``;
- ``meta_info``: plain-data side info, e.g. ``pad_token_id``, ``temperature``, metrics.

It is a plain dataclass of numpy arrays, so it pickles cheaply (Ray ships it by value and reads numpy
arrays zero-copy from its object store). Every method returns a new DataProto; only ``pop`` changes
``self``. Derived objects may share (view) the arrays of their source, they never copy meta_info deeply.

Example::

    data = DataProto.from_dict(
        batch={"scores": np.array([1.0, 0.0, 0.5], dtype=np.float32)},
        non_tensor={"uid": ["q0", "q0", "q1"]},
        meta_info={"temperature": 1.0},
    )
    padded, pad_size = data.pad_to_divisor(2)  # 4 rows: the first row is repeated once, pad_size == 1
    parts = padded.chunk(2)                     # two DataProto of 2 rows, e.g. one per worker
    merged = DataProto.concat(parts).unpad(pad_size)
    assert len(merged) == 3
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Index = int | np.integer | slice | Sequence[int] | np.ndarray


def _as_object_array(values: Any) -> np.ndarray:
    """Return ``values`` as an object array with one element per sample (lists of lists stay 1-D)."""
    if isinstance(values, np.ndarray):
        return values if values.dtype == object else values.astype(object)
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def _equal(a: Any, b: Any) -> bool:
    """Whether two field values are the same (identity first, so an array full of NaN equals itself)."""
    return a is b or bool(np.array_equal(a, b))


def _pick(source: dict[str, Any], keys: Iterable[str] | None, what: str) -> dict[str, Any]:
    """The sub-dict of ``source`` for ``keys`` (all of it when ``keys`` is None); unknown key -> KeyError."""
    if keys is None:
        return dict(source)
    keys = list(keys)
    missing = [k for k in keys if k not in source]
    if missing:
        raise KeyError(f"DataProto has no {what} key(s) {missing}; available: {sorted(source)}")
    return {k: source[k] for k in keys}


def _merge(mine: dict[str, Any], theirs: dict[str, Any], what: str) -> dict[str, Any]:
    """Union of two dicts; a key present in both must hold equal values, else ValueError naming it."""
    merged = dict(mine)
    for key, value in theirs.items():
        if key in merged and not _equal(merged[key], value):
            raise ValueError(f"DataProto.union: {what} key '{key}' differs between the two DataProto")
        merged[key] = value
    return merged


@dataclass
class DataProto:
    """Named per-sample arrays (``batch``, ``non_tensor``) with a shared length, plus ``meta_info``."""

    batch: dict[str, np.ndarray] = field(default_factory=dict)
    non_tensor: dict[str, np.ndarray] = field(default_factory=dict)
    meta_info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.batch = {k: np.asarray(v) for k, v in self.batch.items()}
        self.non_tensor = {k: _as_object_array(v) for k, v in self.non_tensor.items()}
        self._check_lengths()

    def _check_lengths(self) -> None:
        """Raise ValueError naming the first field whose length differs from the first field's."""
        fields = {**self.batch, **self.non_tensor}
        for key, value in fields.items():
            if value.ndim == 0:
                raise ValueError(f"DataProto field '{key}' is a scalar; per-sample fields need a batch dim")
        if not fields:
            return
        first_key, first = next(iter(fields.items()))
        for key, value in fields.items():
            if len(value) != len(first):
                raise ValueError(
                    f"DataProto field '{key}' has length {len(value)}, "
                    f"expected {len(first)} (the length of '{first_key}')"
                )

    @classmethod
    def from_dict(
        cls,
        batch: dict[str, np.ndarray] | None = None,
        non_tensor: dict[str, Any] | None = None,
        meta_info: dict[str, Any] | None = None,
    ) -> DataProto:
        """Build a DataProto; any of the three dicts may be omitted."""
        return cls(dict(batch or {}), dict(non_tensor or {}), dict(meta_info or {}))

    def __len__(self) -> int:
        fields = [*self.batch.values(), *self.non_tensor.values()]
        return len(fields[0]) if fields else 0

    def __getitem__(self, idx: Index) -> DataProto:
        """Rows ``idx`` (int, slice, index or boolean array) as a DataProto; an int gives one row."""
        if isinstance(idx, int | np.integer):
            idx = np.array([idx])
        return DataProto(
            {k: v[idx] for k, v in self.batch.items()},
            {k: v[idx] for k, v in self.non_tensor.items()},
            dict(self.meta_info),
        )

    def keys(self) -> list[str]:
        """Names of all per-sample fields: the batch keys, then the non-tensor keys."""
        return [*self.batch, *self.non_tensor]

    def select(
        self,
        batch_keys: Iterable[str] | None = None,
        non_tensor_keys: Iterable[str] | None = None,
        meta_keys: Iterable[str] | None = None,
    ) -> DataProto:
        """A DataProto with only the named fields; ``None`` keeps every key of that dict."""
        return DataProto(
            _pick(self.batch, batch_keys, "batch"),
            _pick(self.non_tensor, non_tensor_keys, "non_tensor"),
            _pick(self.meta_info, meta_keys, "meta_info"),
        )

    def pop(
        self,
        batch_keys: Iterable[str] | None = None,
        non_tensor_keys: Iterable[str] | None = None,
        meta_keys: Iterable[str] | None = None,
    ) -> DataProto:
        """Remove the named fields from ``self`` and return them; ``None`` pops nothing from that dict."""
        popped = self.select(batch_keys or [], non_tensor_keys or [], meta_keys or [])
        for key in popped.batch:
            del self.batch[key]
        for key in popped.non_tensor:
            del self.non_tensor[key]
        for key in popped.meta_info:
            del self.meta_info[key]
        return popped

    def union(self, other: DataProto) -> DataProto:
        """Merge the fields of both; same-named fields must be equal and the lengths must match."""
        if self.keys() and other.keys() and len(self) != len(other):
            raise ValueError(f"DataProto.union: lengths differ ({len(self)} vs {len(other)})")
        return DataProto(
            _merge(self.batch, other.batch, "batch"),
            _merge(self.non_tensor, other.non_tensor, "non_tensor"),
            _merge(self.meta_info, other.meta_info, "meta_info"),
        )

    def chunk(self, k: int) -> list[DataProto]:
        """Split into ``k`` equal consecutive parts; the length must be divisible by ``k``."""
        if k <= 0:
            raise ValueError(f"DataProto.chunk: k must be positive, got {k}")
        if len(self) % k:
            raise ValueError(
                f"DataProto.chunk: length {len(self)} is not divisible by {k}; call pad_to_divisor({k}) first"
            )
        size = len(self) // k
        return [self[i * size : (i + 1) * size] for i in range(k)]

    def split(self, size: int) -> list[DataProto]:
        """Consecutive parts of ``size`` rows; the last part may be shorter."""
        if size <= 0:
            raise ValueError(f"DataProto.split: size must be positive, got {size}")
        return [self[start : start + size] for start in range(0, len(self), size)]

    @staticmethod
    def concat(parts: Sequence[DataProto]) -> DataProto:
        """Concatenate along the batch dim; all parts need the same fields; meta_info is the first's."""
        if not parts:
            raise ValueError("DataProto.concat: got an empty list")
        first = parts[0]
        for i, part in enumerate(parts[1:], start=1):
            if set(part.keys()) != set(first.keys()):
                diff = sorted(set(part.keys()) ^ set(first.keys()))
                raise ValueError(f"DataProto.concat: part {i} and part 0 differ in fields {diff}")
        return DataProto(
            {k: np.concatenate([p.batch[k] for p in parts]) for k in first.batch},
            {k: np.concatenate([p.non_tensor[k] for p in parts]) for k in first.non_tensor},
            dict(first.meta_info),
        )

    def repeat(self, n: int, interleave: bool = True) -> DataProto:
        """Repeat every row ``n`` times: interleaved [a, a, b, b] or tiled [a, b, a, b]."""
        rows = np.arange(len(self))
        return self[np.repeat(rows, n) if interleave else np.tile(rows, n)]

    def pad_to_divisor(self, d: int) -> tuple[DataProto, int]:
        """Append rows cycled from the start until ``len % d == 0``; return (padded, pad_size)."""
        if d <= 0:
            raise ValueError(f"DataProto.pad_to_divisor: d must be positive, got {d}")
        pad_size = -len(self) % d
        rows = np.arange(len(self))
        return self[np.concatenate([rows, np.arange(pad_size) % max(len(self), 1)])], pad_size

    def unpad(self, pad_size: int) -> DataProto:
        """Drop the last ``pad_size`` rows (undoes ``pad_to_divisor``)."""
        if not 0 <= pad_size <= len(self):
            raise ValueError(f"DataProto.unpad: pad_size {pad_size} is outside [0, {len(self)}]")
        return self[: len(self) - pad_size]
