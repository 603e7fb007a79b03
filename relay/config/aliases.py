"""Settings with two spellings: the higher source wins, two at the same level are refused.

Two kinds of pair:

* ``same``: two names of one number (``rollout.num_pre_q`` is verl's name for ``rollout.n``). Both keys end up
  holding the winner's value.
* ``exclusive``: two ways of saying one thing in different units (``train.micro_batch_size`` sequences per
  process, ``train.per_device_micro_batch_size`` per device); the loser is cleared, so only one reaches derive.

Levels, lowest first: each preset file of the ``extends`` chain (base first) is its own level, then the
environment, then ``--set``. Worked example: ``configs/default.yaml`` sets ``train.micro_batch_size: 1`` and the
user passes ``--set train.per_device_micro_batch_size=1``: ``--set`` is higher, so ``micro_batch_size`` is cleared
and ``--explain`` shows ``train.micro_batch_size: None  # was 1 (preset configs/default.yaml), replaced by
train.per_device_micro_batch_size (--set train.per_device_micro_batch_size=1)``. Both in one ``--set`` list, or
both in one preset file, is an error naming the two (unless a ``same`` pair agrees).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class AliasPair:
    canonical: str
    alias: str
    kind: str  # "same" | "exclusive"


ALIASES: tuple[AliasPair, ...] = (
    AliasPair("rollout.n", "rollout.num_pre_q", "same"),
    AliasPair("train.micro_batch_size", "train.per_device_micro_batch_size", "exclusive"),
)


def source_level(source: str, preset_sources: list[str]) -> int:
    """The precedence level of a layer's source name: presets by their place in the chain, then env, then --set.

    >>> source_level("--set rollout.n=4", ["preset configs/default.yaml"])
    3
    >>> source_level("env ROLLOUT_N", ["preset a.yaml", "preset b.yaml"])
    3
    """
    if source in preset_sources:
        return preset_sources.index(source) + 1
    if source.startswith("env "):
        return len(preset_sources) + 1
    if source.startswith("--set "):
        return len(preset_sources) + 2
    return 0  # the schema default


def resolve_aliases(cfg: DictConfig, sources: dict[str, str], preset_sources: list[str]) -> list[str]:
    """Apply :data:`ALIASES` to ``cfg`` in place (and to ``sources``); returns the problems (same-level clashes).

    ``sources`` maps a key to the source that set it last (keys never set are absent); a replaced key's source
    becomes ``was <value> (<source>), replaced by <winner> (<winner's source>)``.
    """
    problems = []
    for pair in ALIASES:
        values = {key: OmegaConf.select(cfg, key) for key in (pair.canonical, pair.alias)}
        set_keys = [key for key in values if key in sources and values[key] is not None]
        if len(set_keys) < 2:
            if pair.kind == "same" and set_keys == [pair.alias]:  # only the alias: it names the canonical value
                _put(cfg, pair.canonical, values[pair.alias])
                sources[pair.canonical] = f"alias {pair.alias} ({sources[pair.alias]})"
            continue
        levels = {key: source_level(sources[key], preset_sources) for key in set_keys}
        if levels[pair.canonical] == levels[pair.alias]:
            if pair.kind == "same" and values[pair.canonical] == values[pair.alias]:
                continue
            problems.append(
                f"{pair.canonical}={values[pair.canonical]} ({sources[pair.canonical]}) and "
                f"{pair.alias}={values[pair.alias]} ({sources[pair.alias]}) are "
                + ("the same setting and disagree" if pair.kind == "same" else "two spellings of one setting")
                + " at the same level; set only one"
            )
            continue
        winner, loser = sorted(set_keys, key=lambda key: levels[key], reverse=True)
        _put(cfg, loser, values[winner] if pair.kind == "same" else None)
        sources[loser] = (
            f"was {values[loser]} ({sources[loser]}), replaced by {winner}={values[winner]} ({sources[winner]})"
        )
    return problems


def _put(cfg: DictConfig, key: str, value: Any) -> None:
    OmegaConf.update(cfg, key, value, merge=False)
