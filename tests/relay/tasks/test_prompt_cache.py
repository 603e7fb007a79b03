"""The prompt cache returns exactly the ids a fresh tokenisation gives, is never read for other prompts, a tokenizer
or settings it was not made from, ignores a damaged or foreign entry, and stays under its bound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from relay.config import load_config
from relay.repo import REPO_ROOT
from relay.tasks import prompt_cache
from relay.tasks.prompt_cache import LazyTokenizer, cache_dir
from relay.tasks.prompt_source import PromptSource


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def train8(tmp_path) -> Path:
    path = tmp_path / "train8.jsonl"
    lines = (REPO_ROOT / "data" / "gsm8k" / "train.jsonl").read_text().splitlines()[:8]
    path.write_text("\n".join(lines) + "\n")
    return path


def _data(model_dir: Path, train: Path, *overrides: str):
    loaded = load_config(
        REPO_ROOT / "configs" / "tiny.yaml", [f"model.path={model_dir}", f"data.train_path={train}", *overrides], {}
    )
    return loaded.cfg.data


def _ids(data, tokenizer) -> dict[str, list[int]]:
    return PromptSource.from_config(data, tokenizer, 4).prompt_ids


def _entries(home: Path) -> list[Path]:
    return sorted((home / "prompt-cache").glob("*.npz"))


def test_a_hit_is_the_fresh_tokenisation_and_loads_no_tokenizer(home, tiny_model_dir, train8) -> None:
    from transformers import AutoTokenizer

    data = _data(tiny_model_dir, train8)
    fresh = _ids(data, AutoTokenizer.from_pretrained(tiny_model_dir))  # not a LazyTokenizer: never cached
    assert _entries(home) == []
    first = LazyTokenizer(tiny_model_dir)
    assert _ids(data, first) == fresh and first.loaded  # a miss: rendered, tokenised, stored
    assert len(_entries(home)) == 1
    second = LazyTokenizer(tiny_model_dir)
    assert _ids(data, second) == fresh and not second.loaded  # a hit: transformers never asked


def test_another_template_tokenizer_file_or_setting_is_another_entry(home, tiny_model_dir, train8, tmp_path) -> None:
    data = _data(tiny_model_dir, train8)
    base = _ids(data, LazyTokenizer(tiny_model_dir))
    edited = tmp_path / "edited-model"
    shutil.copytree(tiny_model_dir, edited)
    template = edited / "chat_template.jinja"
    template.write_text(template.read_text().replace("<|im_start|>", "<|im_start|> "))
    changed = _ids(_data(edited, train8), LazyTokenizer(edited))
    assert changed != base  # the edited template's prompts, not the cached ones
    other = _ids(_data(tiny_model_dir, train8, "data.prompt_template=tools"), LazyTokenizer(tiny_model_dir))
    assert other != base
    assert len(_entries(home)) == 3


def test_a_damaged_or_foreign_entry_is_ignored_and_written_again(home, tiny_model_dir, train8) -> None:
    data = _data(tiny_model_dir, train8)
    good = _ids(data, LazyTokenizer(tiny_model_dir))
    (entry,) = _entries(home)
    damaged = [
        b"not an npz",
        entry.read_bytes()[:100],  # torn
    ]
    for content in damaged:
        entry.write_bytes(content)
        lazy = LazyTokenizer(tiny_model_dir)
        assert _ids(data, lazy) == good and lazy.loaded
    np.savez(entry, lengths=np.array([3]), ids=np.array([1, 2, 3]))  # one prompt's ids, for 8 prompts
    assert _ids(data, LazyTokenizer(tiny_model_dir)) == good
    # an object array needs pickle to load: refused, never unpickled
    np.savez(entry, lengths=np.array([json.dumps({"x": 1})], dtype=object), ids=np.array([1]))
    assert prompt_cache.read_entry(entry, 8) is None
    assert _ids(data, LazyTokenizer(tiny_model_dir)) == good
    assert prompt_cache.read_entry(entry, 8) is not None  # written again


def test_cache_prompts_false_writes_nothing(home, tiny_model_dir, train8) -> None:
    data = _data(tiny_model_dir, train8, "data.cache_prompts=false")
    lazy = LazyTokenizer(tiny_model_dir)
    _ids(data, lazy)
    assert lazy.loaded and not (home / "prompt-cache").exists()


def test_the_oldest_entries_go_first_past_the_bound(tmp_path) -> None:
    import os

    for i, size in enumerate((400, 300, 200)):
        path = tmp_path / f"{i}.npz"
        path.write_bytes(b"x" * size)
        os.utime(path, (1000 + i, 1000 + i))
    prompt_cache._evict(tmp_path, max_bytes=550)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.npz", "2.npz"]


def test_the_cache_lives_under_relay_home(home) -> None:
    assert cache_dir() == home / "prompt-cache"
