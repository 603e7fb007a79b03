"""The known-bad recoveries reach a process only through its fault's mutation file, and do what they say."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.faults import mutations
from relay.data.gsm8k import Example, PromptBatcher
from relay.faults import FAULT_ENV, Fault
from relay.repo import REPO_ROOT


def _env(marker, name: str | None) -> dict[str, str]:
    if name is not None:
        mutations.arm(marker, name)
    return {FAULT_ENV: Fault("driver.between_steps", 1, "kill", str(marker)).to_env()}


def test_a_process_without_a_mutation_file_is_untouched(tmp_path) -> None:
    assert mutations.install({}) is None
    assert mutations.install(_env(tmp_path / "fault.fired", None)) is None


def test_sitecustomize_patches_the_module_when_it_is_imported(tmp_path) -> None:
    """A fresh interpreter with the mutants on PYTHONPATH: the data cursor a resume restores is one batch late."""
    env = {**_env(tmp_path / "fault.fired", "cursor_late"), "PYTHONPATH": mutations.pythonpath({})}
    code = (
        "from relay.data.gsm8k import Example, PromptBatcher\n"
        "b = PromptBatcher([Example(str(i), 'q', '1') for i in range(8)], 2, 0)\n"
        "b.load_state_dict({'epoch': 0, 'position': 2, 'seed': 0, 'num_examples': 8})\n"
        "print(b.position)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "4", out.stderr
    env.pop(FAULT_ENV)  # not a campaign run: nothing patched
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "2", out.stderr


def test_the_cursor_mutations_move_one_batch_across_epochs(monkeypatch) -> None:
    examples = [Example(str(i), "q", "1") for i in range(8)]
    for name, position, expected in (
        ("cursor_early", 0, (0, 6)),
        ("cursor_late", 8, (2, 2)),
        ("cursor_early", 2, (1, 0)),
    ):
        batcher = PromptBatcher(examples, 2, 0)
        cls = type("Batcher", (PromptBatcher,), {})
        module = type(sys)("fake")
        module.PromptBatcher = cls
        mutations.MUTATIONS[name].patch(module, lambda: True)
        batcher.__class__ = cls
        epoch = 1
        batcher.load_state_dict({"epoch": epoch, "position": position, "seed": 0, "num_examples": 8})
        assert (batcher.epoch, batcher.position) == expected, name
        assert list(batcher._order) == list(PromptBatcher(examples, 2, 0)._permutation(batcher.epoch))


def test_every_mutation_names_a_fault_of_the_campaign_menu() -> None:
    from benchmarks.faults.draw import MENU

    for mutation in mutations.MUTATIONS.values():
        point, step, action = mutation.fault
        assert point in MENU and action in MENU[point][1] and step >= 1, mutation.name
