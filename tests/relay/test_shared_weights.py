"""Weights through a learner memory file: layout, cross-process reads, release, and whose RSS holds the pages."""

import subprocess
import sys

import numpy as np
import pytest

from relay.shared_weights import PAGE, SharedWeights, SharedWeightsView, WeightPublisher, opened_weights, weights_nbytes


def _rss_shmem_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssShmem:"):
                return int(line.split()[1])
    raise AssertionError("no RssShmem in /proc/self/status")


def test_layout_is_page_aligned_and_round_trips() -> None:
    weights = {"a": np.arange(10, dtype=np.float32), "b.weight": np.ones((3, 2), np.float16), "empty": np.zeros(0)}
    publisher = WeightPublisher("node-a")
    handle = publisher.publish(weights, version=3)
    assert [e.offset for e in handle.entries] == [0, PAGE, 2 * PAGE]  # the module docstring's example
    assert handle.nbytes == 40 + 12 and handle.version == 3 and publisher.open_bytes == 3 * PAGE
    with opened_weights(handle, "node-a") as view:
        assert isinstance(view, SharedWeightsView) and list(view) == ["a", "b.weight", "empty"]
        for name, value in weights.items():
            np.testing.assert_array_equal(view[name], value)
            assert view[name].dtype == value.dtype
        assert weights_nbytes(view) == handle.nbytes
    assert publisher.release(handle) and not publisher.release(handle)
    assert publisher.open_bytes == 0
    with pytest.raises(RuntimeError, match="released before this process read them"):
        SharedWeightsView(handle)


def test_bfloat16_round_trips_bit_for_bit_and_counts_two_bytes() -> None:
    """A bfloat16 sync (ml_dtypes arrays, as JAX exports them) keeps its dtype through the file and half the bytes."""
    import ml_dtypes

    weights = {"w": (np.arange(12, dtype=np.float32) / 7).reshape(3, 4).astype(ml_dtypes.bfloat16)}
    publisher = WeightPublisher("node-a")
    handle = publisher.publish(weights, version=1)
    assert handle.nbytes == 24 and handle.entries[0].dtype == "bfloat16"
    with opened_weights(handle, "node-a") as view:
        assert view["w"].dtype == weights["w"].dtype
        np.testing.assert_array_equal(np.asarray(view["w"]).view(np.uint16), weights["w"].view(np.uint16))
    publisher.close()


def test_a_plain_dict_passes_through() -> None:
    weights = {"a": np.ones(3, np.float32)}
    with opened_weights(weights, "any") as tensors:
        assert tensors is weights
    assert weights_nbytes(weights) == 12


def test_another_node_is_refused_by_name() -> None:
    handle = SharedWeights("/proc/1/fd/99", "node-aaaaaaaaaaaaaaa", 2, (), 0)
    with pytest.raises(RuntimeError, match="trainer.weight_sync=object_store"):
        SharedWeightsView(handle, node_id="node-bbbbbbbbbbbbbbb")


def test_another_process_reads_the_file_and_the_publisher_never_maps_it() -> None:
    """The reader is a separate process (as a rollout actor is); the publisher's shared RSS does not grow by the
    64 MiB it published (the object store's put made those pages resident in the writer)."""
    big = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    publisher = WeightPublisher("node-a")
    before = _rss_shmem_kib()
    handle = publisher.publish({"w": big, "b": np.arange(5, dtype=np.int64)}, version=1)
    assert _rss_shmem_kib() - before < 1024  # KiB: none of the 64 MiB is mapped here
    code = (
        "import pickle, sys, numpy as np; from relay.shared_weights import SharedWeightsView; "
        "v = SharedWeightsView(pickle.loads(sys.stdin.buffer.read())); "
        "print(float(v['w'].sum(dtype=np.float64)), v['b'].tolist())"
    )
    import pickle

    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(handle), capture_output=True, check=True)
    total, tail = out.stdout.decode().split(" ", 1)
    assert float(total) == pytest.approx(float(big.sum(dtype=np.float64)), rel=1e-9)
    assert tail.strip() == "[0, 1, 2, 3, 4]"
    publisher.close()
