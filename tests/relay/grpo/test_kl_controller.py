"""Golden values of the KL-in-reward controller (Ziegler et al. 2019's rule, worked by hand)."""

import pytest

from relay.grpo.kl_controller import KLController


def test_adaptive_rule_golden() -> None:
    # e = clip(0.08 / 0.05 - 1, -0.2, 0.2) = 0.2 -> 0.1 * (1 + 0.2 * 32 / 1000) = 0.10064
    ctrl = KLController(0.1, "adaptive", target_kl=0.05, horizon=1000)
    assert ctrl.update(0.08, 32) == pytest.approx(0.10064)
    # e = 0.045 / 0.05 - 1 = -0.1 -> 0.10064 * (1 - 0.1 * 32 / 1000) = 0.100317952
    assert ctrl.update(0.045, 32) == pytest.approx(0.10064 * (1 - 0.0032))


def test_fixed_keeps_its_value_and_bad_type_names_the_key() -> None:
    ctrl = KLController(0.1, "fixed")
    assert ctrl.update(10.0, 1000) == 0.1
    with pytest.raises(ValueError, match=r"algorithm.kl_ctrl.type='pid': must be one of fixed, adaptive"):
        KLController(0.1, "pid")
    with pytest.raises(ValueError, match=r"needs target_kl and horizon"):  # the schema, not this class, has defaults
        KLController(0.1, "adaptive")
