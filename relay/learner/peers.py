"""Lining up the learner's JAX processes before a newly compiled program first runs.

On CPU the cross-process collectives run on gloo, and XLA builds a program's gloo communicators the first time the
program runs (``xla/backends/cpu/collectives/gloo_collectives.cc``: one ``connectFullMesh`` per local device, on
first use of a device set). That rendezvous has a deadline of its own of about 30 s, which no JAX option
changes: a host that reaches it more than that after its peer fails the run with ``Gloo context initialization
failed`` (a ``GetKeyValue() timed out`` or a ``Connect timeout``). Compiling a step takes each host a different
time (on a loaded 2-core machine the two learner hosts of the 2-host preset's test differed by more than 30 s),
so the first run of a new program can miss it. Measured with two processes of 4 CPU devices each, an 8-device sum
and one host 40 s later than the other: it fails without a barrier and passes with one
(``tests/relay/learner/test_peers.py``).

:func:`wait_for_peers` is a barrier on the JAX coordination service (the ``distributed`` client that
``jax.distributed.initialize`` made; JAX's own array serialization waits on the same client in
``jax/experimental/array_serialization/pytree_serialization.py``, jax 0.10.2): a gRPC call to the coordinator, no
gloo, with a deadline that can be set. :class:`relay.learner.learner.JaxLearner` calls it after each compile, so
every host starts the program's first run within moments of the others.
"""

from __future__ import annotations

# The barrier's deadline when the learner has none (learner.collective_timeout_s: null): a day, i.e. none in
# practice; the coordination service wants a finite one.
NO_DEADLINE_S = 24 * 3600.0


def wait_for_peers(name: str, timeout_s: float | None) -> None:
    """Return once every process of this JAX job has called ``wait_for_peers(name, ...)``; at once in a job of one
    process. Every process must pass the same ``name``, unique per barrier in the job. Raises JAX's error
    (``DEADLINE_EXCEEDED``) when a peer has not come within ``timeout_s`` seconds (None: :data:`NO_DEADLINE_S`)."""
    import jax
    from jax._src import distributed

    client = distributed.global_state.client
    if jax.process_count() == 1 or client is None:
        return
    seconds = NO_DEADLINE_S if timeout_s is None else timeout_s
    client.wait_at_barrier(name, timeout_in_ms=int(seconds * 1000))
