"""The optimizer builder: schedules by hand-computed values, every optimizer name steps."""

import jax.numpy as jnp
import numpy as np
import pytest

from relay.learner.optimizer import build_optimizer, build_schedule


def _schedule(**kw):
    base = {"type": "constant", "peak_value": 1e-6, "init_value": 0.0, "end_value": 0.0}
    return {**base, **kw}


def test_constant_with_linear_warmup() -> None:
    s = build_schedule(_schedule(), total_steps=10, warmup_steps=2)
    np.testing.assert_allclose([float(s(i)) for i in range(4)], [0.0, 5e-7, 1e-6, 1e-6], rtol=1e-6)
    assert float(build_schedule(_schedule(), 10, 0)(0)) == pytest.approx(1e-6)


def test_warmup_cosine_reaches_end_value() -> None:
    s = build_schedule(_schedule(type="warmup_cosine", end_value=1e-7), total_steps=10, warmup_steps=2)
    assert float(s(0)) == 0.0 and float(s(2)) == pytest.approx(1e-6)
    # halfway through the cosine part (step 6 of 2..10): end + (peak - end) / 2
    assert float(s(6)) == pytest.approx(1e-7 + 0.5 * 9e-7, rel=1e-5)
    assert float(s(10)) == pytest.approx(1e-7, rel=1e-5)


@pytest.mark.parametrize("name", ["adamw", "lion", "sgd"])
def test_each_optimizer_moves_against_the_gradient(name: str) -> None:
    opt = {
        "name": name,
        "clip_norm": 1.0,
        "weight_decay": 0.0,
        "b1": 0.9,
        "b2": 0.99,
        "eps": 1e-8,
        "lr_schedule": _schedule(peak_value=0.1),
    }
    tx, _ = build_optimizer(opt, total_steps=1, warmup_steps=0)
    params = {"w": jnp.array([1.0, -1.0])}
    updates, _ = tx.update({"w": jnp.array([0.5, -0.5])}, tx.init(params), params)
    assert np.all(np.sign(np.asarray(updates["w"])) == [-1.0, 1.0])


def test_gradient_clipping_by_global_norm() -> None:
    opt = {
        "name": "sgd",
        "clip_norm": 1.0,
        "weight_decay": 0.0,
        "b1": 0.9,
        "b2": 0.99,
        "eps": 1e-8,
        "lr_schedule": _schedule(peak_value=1.0),
    }
    tx, _ = build_optimizer(opt, 1, 0)
    params = {"w": jnp.zeros(2)}
    updates, _ = tx.update({"w": jnp.array([3.0, 4.0])}, tx.init(params), params)  # norm 5 -> clipped to 1
    np.testing.assert_allclose(np.asarray(updates["w"]), [-0.6, -0.8], rtol=1e-6)
