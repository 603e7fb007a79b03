"""The arms of the learning race: what each runs, and every way it differs from the others.

Every arm trains the same model on the same problems in the same order, with the same prompt, reward, group size,
prompts per step, learning rate, optimizer, KL and clip (``benchmarks.learning.trl_baseline`` mirrors the preset for
TRL). They differ only in what this registry lists, so a lead can be traced to its cause:

- ``relay``: the preset as shipped (vLLM sampling, the group filter);
- ``relay_nofilter``: the same with ``algorithm.filter_groups.enable=false``, every group trained: the algorithm TRL
  runs, so ``relay_nofilter`` against ``trl_vllm`` is the framework's step at the same engine and algorithm;
- ``trl``: TRL's GRPOTrainer sampling with HF ``generate``;
- ``trl_vllm``: TRL sampling with vLLM in its own process (``use_vllm``, colocate mode).

>>> [a.name for a in ARMS.values()]
['relay', 'relay_nofilter', 'trl', 'trl_vllm']
>>> difference_rows([ARMS["relay"], ARMS["trl"]])[3]
'| trl | TRL GRPOTrainer | transformers generate | off: every group trained |'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arm:
    """One arm: the trainer (``relay`` or ``trl``), its settings on top of the preset, and what they mean."""

    name: str
    trainer: str
    overrides: tuple[str, ...] = ()  # config overrides (``--set``) on top of the preset
    trl_vllm: bool = False  # TRL only: sample with vLLM (``benchmarks.learning.trl_baseline --vllm``)
    engine: str = "vLLM"  # how the arm samples, in words
    group_filter: bool = False  # DAPO dynamic sampling: groups whose samples all scored the same are not trained

    @property
    def trainer_name(self) -> str:
        return "Relay" if self.trainer == "relay" else "TRL GRPOTrainer"


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("relay", "relay", group_filter=True),
        Arm("relay_nofilter", "relay", overrides=("algorithm.filter_groups.enable=false",)),
        Arm("trl", "trl", engine="transformers generate"),
        Arm("trl_vllm", "trl", trl_vllm=True),
    )
}
# The arm whose final accuracy is the target the others race to (the baseline users would pick).
REFERENCE_ARM = "trl"


def arms_named(names: str) -> list[Arm]:
    """The arms of a comma-separated list; SystemExit naming the unknown one and the known ones."""
    picked = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in picked if n not in ARMS]
    if unknown or not picked:
        raise SystemExit(f"--arms {names!r}: unknown {unknown}; the arms are {', '.join(ARMS)}")
    return [ARMS[n] for n in picked]


def difference_rows(arms: list[Arm]) -> list[str]:
    """The Markdown table of what differs between ``arms`` (everything else is shared: module docstring)."""
    rows = ["| arm | trainer | sampling | group filter |", "|---|---|---|---|"]
    for arm in arms:
        kept = "on: uniform groups dropped, prompts drawn again" if arm.group_filter else "off: every group trained"
        rows.append(f"| {arm.name} | {arm.trainer_name} | {arm.engine} | {kept} |")
    return rows
