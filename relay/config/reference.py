"""The configuration reference: every key of the schema with its type, default, allowed values and meaning.

Each fact has one home and the reference reads it from there: the type and default from the schema's dataclasses,
the meaning from the comment on or above the field (a section's from its class docstring), the allowed values from
the range checks the validation makes (:func:`relay.config.checks.recording_rules`). ``docs/configuration.md`` is
this module's output, and ``trainer.py --explain KEY`` prints one key's entry:

    python -m relay.config.reference --write      # regenerate docs/configuration.md
    python -m relay.config.reference --check      # exit 1 when it is stale or a key has no meaning

Worked example of the comment rule: in

    # Ray logical CPUs reserved in the role's placement-group bundle.
    cpus: float = 0.5

``rollout.resources.cpus`` means "Ray logical CPUs reserved in the role's placement-group bundle."; a comment at the
end of the field's line is appended to the block above it.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from relay.config.schema import RelayConfig
from relay.repo import REPO_ROOT

REFERENCE_PATH = REPO_ROOT / "docs" / "configuration.md"
_FIELD = re.compile(r"^\s+(\w+)\s*:")
# Configs beside the defaults that switch on the optional sections, so that every check runs once.
_RULE_VARIANTS: tuple[dict, ...] = (
    {},
    {"model": {"lora": {}}},
    {"rollout": {"agent": {"enable": True}}},
    {"reward": {"mode": "solver"}},
    {
        "algorithm": {
            "use_kl_in_reward": True,
            "filter_groups": {"enable": True, "retry_unsolved": {"enable": True, "temperature": 1.0}},
        }
    },
    {"learner": {"hosts": 2}, "cluster": {"nodes": 2}},
)


@dataclass(frozen=True)
class KeyDoc:
    """One key's entry in the reference."""

    key: str
    type: str
    default: Any
    allowed: str
    meaning: str

    def text(self) -> str:
        """The entry as ``--explain KEY`` prints it."""
        allowed = f"\nallowed: {self.allowed}" if self.allowed else ""
        return f"{self.key}\ntype: {self.type}\ndefault: {_show(self.default)}{allowed}\n{self.meaning}\n"


def _show(value: Any) -> str:
    """A default as YAML writes it: ``null``, ``true``, ``[a, b]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(map(_show, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


@cache
def field_comments(cls: type) -> dict[str, str]:
    """``{field name: its comment}`` in the source of dataclass ``cls``: the comment lines right above the field
    (a blank line ends a block) and the comment at the end of its line."""
    source = inspect.getsource(cls)
    block: list[str] = []
    trailing: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.line.strip() != tok.string.strip():
            trailing[tok.start[0]] = tok.string.lstrip("#").strip()
    out: dict[str, str] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        match = _FIELD.match(line)
        if match and not stripped.startswith(("def ", "return")):
            parts = [*block, trailing.get(number, "")]
            out[match.group(1)] = " ".join(part for part in parts if part)
        block = []
    return out


def _section_class(annotation: str) -> type | None:
    """The schema dataclass an annotation names (``LoraConfig | None`` -> LoraConfig), or None for a leaf."""
    import relay.config.agent_schema as agent_schema
    import relay.config.algorithm_schema as algorithm_schema
    import relay.config.data_schema as data_schema
    import relay.config.schema as schema

    modules = (schema, data_schema, algorithm_schema, agent_schema)
    for name in re.findall(r"\w+", annotation):
        for module in modules:
            cls = getattr(module, name, None)
            if dataclasses.is_dataclass(cls):
                return cls
    return None


def _walk(cls: type, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(key, type, default, meaning)`` of every leaf under ``cls``; an optional section (``X | None``) is also a
    leaf of its own (its default is null)."""
    comments = field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        section = _section_class(str(f.type))
        meaning = comments.get(f.name, "")
        if section is None:
            rows.append((key, str(f.type), default, meaning))
            continue
        if "None" in str(f.type):
            rows.append((key, f"section | null ({section.__name__})", default, meaning))
        rows += _walk(section, f"{key}.")
    return rows


@cache
def recorded_rules() -> dict[str, str]:
    """``{key: allowed values}`` from the validation's checks, run on the defaults and on :data:`_RULE_VARIANTS`."""
    from omegaconf import OmegaConf

    from relay.config.checks import recording_rules
    from relay.config.validate import validate

    rules: dict[str, list[str]] = {}
    for variant in _RULE_VARIANTS:
        cfg = OmegaConf.merge(OmegaConf.structured(RelayConfig), variant)
        with recording_rules() as recorded:
            validate(cfg)
        for key, rule in recorded:
            rules.setdefault(key, [])
            if rule not in rules[key]:
                rules[key].append(rule)
    return {key: ", ".join(found) for key, found in rules.items()}


@cache
def key_docs() -> dict[str, KeyDoc]:
    """Every key of the schema, in schema order."""
    rules = recorded_rules()
    return {
        key: KeyDoc(key, type_, default, rules.get(key, ""), meaning)
        for key, type_, default, meaning in _walk(RelayConfig)
    }


def undocumented_keys() -> list[str]:
    return [key for key, doc in key_docs().items() if not doc.meaning]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """``docs/configuration.md``."""
    lines = [
        "# Configuration reference",
        "",
        "Every key of a Relay config: its type, its default, the values the validation allows and what it means.",
        "Generated from the schema (`relay/config/schema.py` and the sections it imports: `data_schema.py`,",
        "`algorithm_schema.py`, `agent_schema.py`) and the validation's checks by",
        "`python -m relay.config.reference --write`; a test fails when this file is stale.",
        "`python trainer.py --explain KEY` prints one entry; `python trainer.py --explain` prints every value of",
        "a config and where it came from (default, preset, environment, `--set`).",
        "",
        "Precedence: schema default < preset (and the presets it `extends:`) < environment variable < `--set`.",
    ]
    section = None
    for doc in key_docs().values():
        top = doc.key.split(".")[0]
        if top != section:
            section = top
            lines += ["", f"## `{top}`", "", "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
        allowed = _cell(doc.allowed) if doc.allowed else ""
        lines.append(
            f"| `{doc.key}` | {_cell(doc.type)} | `{_cell(_show(doc.default))}` | {allowed} | {_cell(doc.meaning)} |"
        )
    return "\n".join(lines + _environment_section()) + "\n"


def _environment_section() -> list[str]:
    """The environment variables that set keys (:data:`relay.config.sources.ENV_OVERRIDES`)."""
    from relay.config.sources import RELAY_PREFIX, RUNNER_ENV

    lines = [
        "",
        "## Environment variables",
        "",
        "Each sets one key, above a preset and below `--set`. The short names (from users' own launch scripts; Relay "
        f"ships none) are read with and without the `{RELAY_PREFIX}` prefix; when both spellings are set the prefixed "
        "one wins. The run header prints every "
        "one applied and `manifest.json` records them under `env_overrides`.",
        "",
        "| variable | key |",
        "|---|---|",
    ]
    lines += [f"| `{RELAY_PREFIX}{name}`, `{name}` | `{key}` |" for name, key in RUNNER_ENV.items()]
    lines.append(f"| `{RELAY_PREFIX}RUN_NAME` | `trainer.run_name` (set by `submit.py` for a submitted job) |")
    engine = "`rollout.engine` (`hf` or `vllm`, for every trainer a script starts)"
    lines.append(f"| `{RELAY_PREFIX}ROLLOUT_ENGINE` | {engine} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"write {REFERENCE_PATH.relative_to(REPO_ROOT)}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the file is stale or a key has no meaning")
    args = parser.parse_args(argv)
    missing = undocumented_keys()
    if missing:
        print(f"keys without a comment in the schema: {', '.join(missing)}", file=sys.stderr)
        return 1
    text = render()
    if args.write:
        Path(REFERENCE_PATH).write_text(text)
        print(f"wrote {REFERENCE_PATH}")
        return 0
    if REFERENCE_PATH.is_file() and REFERENCE_PATH.read_text() == text:
        return 0
    print(f"{REFERENCE_PATH} is stale: run python -m relay.config.reference --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
