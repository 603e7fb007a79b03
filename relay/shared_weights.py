"""Weights passed between processes of one node through a memory file, read one tensor at a time.

The object store made every weight sync cost memory twice over: ``ray.put`` writes the weights into the
store's shared memory from the learner (those pages then stay resident in the learner: its RSS grew by the
model's size), and the rollout reads them there (the same pages, now in its RSS too). On one node Relay
instead writes them into an anonymous memory file (``os.memfd_create``) of the learner process:

- the learner writes with ``pwrite`` (the pages are never mapped into the learner, so they are in no
  process's RSS), and passes a small :class:`SharedWeights` handle through Ray;
- a rollout engine or actor copy opens ``/proc/<learner pid>/fd/<fd>`` and reads the tensors through
  :class:`SharedWeightsView`, a mapping that maps each tensor only while the reader holds it (an engine copies
  tensor after tensor into its own parameters, so about one tensor is mapped at a time);
- the learner closes the file when the driver releases the handle; if the learner dies, the kernel frees it
  with the process: nothing is left behind in ``/dev/shm``.

Worked example: 2 tensors of 10 and 3 float32 values are laid out at offsets 0 and 4096 (each tensor starts
on a page, so it can be mapped alone); the file holds 4096 + 12 bytes.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

PAGE = mmap.ALLOCATIONGRANULARITY


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str  # numpy dtype name, e.g. "float32" or "bfloat16" (numpy_dtype reads it back)
    shape: tuple[int, ...]
    offset: int  # byte offset in the file, a multiple of PAGE


@dataclass(frozen=True)
class SharedWeights:
    """A handle to weights published by :class:`WeightPublisher`: picklable, a few KB whatever the model."""

    path: str  # /proc/<pid>/fd/<fd> of the publishing process
    node_id: str  # the node whose processes can open it
    version: int
    entries: tuple[TensorEntry, ...]
    nbytes: int  # the tensors' bytes (without page padding)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a :class:`TensorEntry`: numpy's own, or ``bfloat16`` from ml_dtypes (the type JAX's
    bfloat16 arrays have on the host). ``numpy_dtype("bfloat16").itemsize == 2``."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _layout(weights: Mapping[str, np.ndarray]) -> tuple[tuple[TensorEntry, ...], int]:
    """Page-aligned offsets for ``weights`` in order, and the file size."""
    entries, offset = [], 0
    for name, value in weights.items():
        array = np.asarray(value)
        entries.append(TensorEntry(name, array.dtype.name, tuple(array.shape), offset))
        offset += -(-max(array.nbytes, 1) // PAGE) * PAGE
    return tuple(entries), offset


class WeightPublisher:
    """The learner's side: each :meth:`publish` writes a new memory file; :meth:`release` closes one."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self._fds: dict[str, int] = {}  # path -> fd of the files not yet released

    def publish(self, weights: Mapping[str, np.ndarray], version: int) -> SharedWeights:
        entries, size = _layout(weights)
        fd = os.memfd_create(f"relay-weights-v{version}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            for entry in entries:
                data = memoryview(np.ascontiguousarray(weights[entry.name]).reshape(-1).view(np.uint8))
                written = 0
                while written < len(data):
                    written += os.pwrite(fd, data[written:], entry.offset + written)
        except BaseException:
            os.close(fd)
            raise
        path = f"/proc/{os.getpid()}/fd/{fd}"
        self._fds[path] = fd
        nbytes = sum(int(np.prod(e.shape, dtype=np.int64)) * numpy_dtype(e.dtype).itemsize for e in entries)
        return SharedWeights(path, self.node_id, version, entries, nbytes)

    def release(self, handle: SharedWeights) -> bool:
        """Close ``handle``'s file (its memory is freed once no reader maps it); False if it was not open."""
        fd = self._fds.pop(handle.path, None)
        if fd is None:
            return False
        os.close(fd)
        return True

    @property
    def open_bytes(self) -> int:
        """Bytes held in files not yet released (page-padded)."""
        return sum(os.fstat(fd).st_size for fd in self._fds.values())

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class SharedWeightsView(Mapping[str, np.ndarray]):
    """Read-only ``{name: array}`` over a :class:`SharedWeights` file; each lookup maps that tensor alone
    (released when the array is dropped). Raises a clear error on another node or after a release."""

    def __init__(self, handle: SharedWeights, node_id: str | None = None) -> None:
        if node_id is not None and node_id != handle.node_id:
            raise RuntimeError(
                f"weights v{handle.version} were published on node {handle.node_id[:12]}, this process runs on "
                f"{node_id[:12]}: set trainer.weight_sync=object_store for roles on several nodes"
            )
        try:
            self._file = open(handle.path, "rb")  # noqa: SIM115 - kept open for the view's lifetime
        except FileNotFoundError as exc:
            raise RuntimeError(f"weights v{handle.version} were released before this process read them") from exc
        self.handle = handle
        self._entries = {e.name: e for e in handle.entries}

    def __getitem__(self, name: str) -> np.ndarray:
        entry = self._entries[name]
        count, dtype = int(np.prod(entry.shape, dtype=np.int64)), numpy_dtype(entry.dtype)
        if count == 0:
            return np.zeros(entry.shape, dtype)
        return np.memmap(self._file, dtype, "r", entry.offset, entry.shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        self._file.close()


def weights_nbytes(weights: Mapping[str, np.ndarray]) -> int:
    """The tensors' bytes, without reading a :class:`SharedWeightsView`'s data."""
    if isinstance(weights, SharedWeightsView):
        return weights.handle.nbytes
    return sum(int(np.asarray(v).nbytes) for v in weights.values())


@contextmanager
def opened_weights(
    weights: Mapping[str, np.ndarray] | SharedWeights, node_id: str | None = None
) -> Iterator[Mapping[str, np.ndarray]]:
    """``with opened_weights(weights) as tensors:`` the ``{name: array}`` mapping of either a plain dict (the
    object store's copy, as Ray resolved it) or a :class:`SharedWeights` handle (a view over its file, checked
    against this process's ``node_id`` and closed on exit)."""
    if not isinstance(weights, SharedWeights):
        yield weights
        return
    view = SharedWeightsView(weights, node_id)
    try:
        yield view
    finally:
        view.close()
