"""The coefficient of the KL penalty in the reward (``algorithm.kl_ctrl``): fixed, or adapted towards a target KL
as in Ziegler et al. 2019 ("Fine-Tuning Language Models from Human Preferences", the PPO-for-LMs controller)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KL_CTRL_TYPES = ("fixed", "adaptive")
# The controller's proportional error is clipped to +-this (the paper's 0.2).
ERROR_CLIP = 0.2


@dataclass
class KLController:
    """``value`` is the current coefficient; :meth:`update` moves it after each batch (``adaptive``) or not
    (``fixed``).

    Adaptive rule: ``e = clip(kl / target - 1, -0.2, 0.2)``, ``value *= 1 + e * n / horizon`` with ``kl`` the
    batch's mean per-token KL and ``n`` its number of sequences: above the target the coefficient grows, below it
    shrinks, by at most ``0.2 * n / horizon`` per batch.

    Worked example: value 0.1, target 0.05, horizon 1000, a batch of 32 sequences at KL 0.08: ``e = min(0.6, 0.2) =
    0.2``, ``value = 0.1 * (1 + 0.2 * 32 / 1000) = 0.10064``; at KL 0.04: ``e = -0.2``, ``value = 0.09936``.
    """

    value: float
    type: str = "fixed"
    target_kl: float | None = None  # adaptive only; the config's defaults are the schema's (KLCtrlConfig)
    horizon: int | None = None

    def __post_init__(self) -> None:
        if self.type not in KL_CTRL_TYPES:
            raise ValueError(f"algorithm.kl_ctrl.type={self.type!r}: must be one of {', '.join(KL_CTRL_TYPES)}")
        if self.type == "adaptive" and (self.target_kl is None or self.horizon is None):
            raise ValueError("an adaptive KL controller needs target_kl and horizon (algorithm.kl_ctrl)")

    @classmethod
    def from_config(cls, algorithm: Any) -> KLController:
        """From ``algorithm.kl_coef`` (the initial value) and the ``algorithm.kl_ctrl`` section."""
        ctrl = algorithm.kl_ctrl
        return cls(float(algorithm.kl_coef), str(ctrl.type), float(ctrl.target_kl), int(ctrl.horizon))

    def update(self, current_kl: float, n_steps: int) -> float:
        """Adapt ``value`` to a batch of ``n_steps`` sequences with mean per-token KL ``current_kl``; returns it."""
        if self.type == "adaptive":
            error = min(max(current_kl / self.target_kl - 1.0, -ERROR_CLIP), ERROR_CLIP)
            self.value *= 1.0 + error * n_steps / self.horizon
        return self.value
