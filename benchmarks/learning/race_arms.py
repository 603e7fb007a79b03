"""The arms of the learning race: what each runs, and every way it differs from the others.

Every arm trains the same model on the same problems in the same order, with the same prompt, reward, group size,
prompts per step, learning rate, optimizer, KL and clip (``benchmarks.learning.trl_baseline`` mirrors the preset for
TRL). They differ only in what this registry lists, so a lead can be traced to its cause:

- ``relay``: the preset as shipped (vLLM sampling, the group filter);
- ``relay_nofilter``: the same with ``algorithm.filter_groups.enable=false``, every group trained: the algorithm TRL
  runs, so ``relay_nofilter`` against ``trl_vllm`` is the framework's step at the same engine and algorithm;
- ``trl``: TRL's GRPOTrainer sampling with HF ``generate``;
- ``trl_vllm``: TRL sampling with vLLM in its own process (``use_vllm``, colocate mode);
- ``relay_curriculum``: the preset reached through a curriculum (``race --curriculum CONFIG``: easier levels first,
  the preset's problems last), against ``relay`` on the preset's level from the first step. Not a default arm: it
  needs the curriculum preset of the race's ``--config``.

>>> [a.name for a in ARMS.values()]
['relay', 'relay_nofilter', 'trl', 'trl_vllm', 'relay_curriculum']
>>> print(difference_rows([ARMS["relay"], ARMS["trl"]])[3])
| trl | TRL GRPOTrainer | transformers generate | off: every group trained | the preset's |
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Arm:
    """One arm: the trainer (``relay`` or ``trl``), its settings on top of the preset, and what they mean."""

    name: str
    trainer: str
    overrides: tuple[str, ...] = ()  # config overrides (``--set``) on top of the preset
    trl_vllm: bool = False  # TRL only: sample with vLLM (``benchmarks.learning.trl_baseline --vllm``)
    engine: str = "vLLM"  # how the arm samples, in words
    group_filter: bool = False  # DAPO dynamic sampling: groups whose samples all scored the same are not trained
    curriculum: bool = False  # trains from the race's --curriculum preset instead of its --config

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
        Arm("relay_curriculum", "relay", group_filter=True, curriculum=True),
    )
}
# The arms a race runs unless told (relay_curriculum needs a curriculum preset).
DEFAULT_ARMS = ("relay", "relay_nofilter", "trl", "trl_vllm")
# The arm whose final accuracy is the target the others race to (the baseline users would pick).
REFERENCE_ARM = "trl"


def arms_named(names: str, curriculum: Path | None = None, reference: str = REFERENCE_ARM) -> list[Arm]:
    """The arms of a comma-separated list; SystemExit naming the unknown one and the known ones, a curriculum arm
    without a ``--curriculum`` preset, or a ``--reference`` that is not among the arms."""
    picked = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in picked if n not in ARMS]
    if unknown or not picked:
        raise SystemExit(f"--arms {names!r}: unknown {unknown}; the arms are {', '.join(ARMS)}")
    if curriculum is None and any(ARMS[n].curriculum for n in picked):
        raise SystemExit(
            f"--arms {names!r}: relay_curriculum trains from a curriculum preset; give --curriculum CONFIG "
            "(configs/arithmetic_3digit_curriculum_smollm2.yaml for --config configs/arithmetic_3digit_smollm2.yaml)"
        )
    if reference not in picked:
        raise SystemExit(f"--reference {reference!r}: not among --arms {names!r}; name one of {', '.join(picked)}")
    return [ARMS[n] for n in picked]


def difference_rows(arms: list[Arm]) -> list[str]:
    """The Markdown table of what differs between ``arms`` (everything else is shared: module docstring)."""
    rows = ["| arm | trainer | sampling | group filter | problems |", "|---|---|---|---|---|"]
    for arm in arms:
        kept = "on: uniform groups dropped, prompts drawn again" if arm.group_filter else "off: every group trained"
        problems = "a curriculum: easier levels first, the preset's last" if arm.curriculum else "the preset's"
        rows.append(f"| {arm.name} | {arm.trainer_name} | {arm.engine} | {kept} | {problems} |")
    return rows


def check_curriculum(curriculum: Path, config: Path) -> None:
    """SystemExit unless ``curriculum`` is a curriculum whose last level is ``config``'s task on the same held-out
    split: the curriculum arm is judged on ``config``'s problems, so it must end where the direct arm trains."""
    from omegaconf import OmegaConf

    from relay.config import load_config

    ours, theirs = (load_config(p, [], environ={}).cfg.data for p in (curriculum, config))
    levels = ours.curriculum.levels
    if not levels:
        raise SystemExit(f"--curriculum {curriculum}: data.curriculum.levels is empty; give a curriculum preset")
    last, target = (OmegaConf.to_container(o, resolve=True) for o in (levels[-1].options, theirs.generate.options))
    if last != target or ours.generate.test_seed != theirs.generate.test_seed:
        raise SystemExit(
            f"--curriculum {curriculum}: its last level ({levels[-1].name}) or test_seed differs from --config "
            f"{config}'s data.generate; the curriculum must end on the task the race judges (set the last level's "
            "options to --config's data.generate.options)"
        )
