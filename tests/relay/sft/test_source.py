"""relay.sft.source: GSM8K traces tokenized once and served as the learner's batches, resumably; the learner's
supervised settings train on them."""

import numpy as np
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from relay.config.schema import RelayConfig
from relay.repo import REPO_ROOT
from relay.sft.source import SftSource


def _cfg(**sft: object):
    return OmegaConf.merge(
        OmegaConf.structured(RelayConfig),
        {"sft": {"enable": True, "train_size": 8, "val_size": 4, **sft}, "rollout": {"n": 1, "batch_size": 4}},
        {"data": {"max_response_length": 512}, "algorithm": {"use_kl_loss": False}},
    )


def test_batches_of_tool_traces_resume_where_they_stopped(tiny_model_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    source = SftSource.from_config(_cfg(), tokenizer, batch_size=4)
    assert len(source.uids) == 8 and source.skipped == {} and source.cut == 0
    first = source.next_batch()
    assert (
        first.batch["input_ids"].shape[0] == 4 and first.meta_info["prompt_length"] == first.batch["prompts"].shape[1]
    )
    assert (
        0
        < first.batch["response_mask"].sum()
        < first.batch["attention_mask"][:, first.meta_info["prompt_length"] :].sum()
    )
    state = source.batcher.state_dict()
    second = source.next_batch()
    again = SftSource.from_config(_cfg(), tokenizer, batch_size=4)
    again.batcher.load_state_dict(state)
    np.testing.assert_array_equal(again.next_batch().batch["input_ids"], second.batch["input_ids"])
    assert source.epochs_done == 1


def test_plain_traces_train_every_response_token_and_validation_is_the_val_file(tiny_model_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    source = SftSource.from_config(_cfg(traces="gsm8k_plain"), tokenizer, batch_size=4, split="val")
    assert source.uids == ["test-1", "test-2", "test-3", "test-4"]
    batch = source.batch_of([0, 1, 2, 3]).batch
    width = batch["prompts"].shape[1]
    np.testing.assert_array_equal(batch["response_mask"], batch["attention_mask"][:, width:])


def test_the_learner_settings_of_a_warm_start(tiny_model_dir) -> None:
    from relay.learner.settings import loss_settings

    settings = loss_settings(_cfg(), {})
    assert (settings.objective, settings.temperature, settings.kl_coef, settings.ref_in_learner) == (
        "sft",
        1.0,
        0.0,
        False,
    )


def _sums_cfg(**data: object):
    generate = {"seed": 1, "test_seed": 3000001, "train_size": 40, "test_size": 8}
    options = OmegaConf.load(REPO_ROOT / "configs" / "arithmetic_smollm2.yaml").data.generate.options  # its sums
    return OmegaConf.merge(
        _cfg(traces="worked_sums", train_size=16, val_size=4),
        {
            "data": {
                "task": "reasoning_gym",
                "train_path": None,
                "test_path": None,
                "generate": {**generate, "options": options},
                **data,
            }
        },
    )


def test_worked_sums_are_the_runs_own_rows_prompted_as_grpo_prompts_them(tiny_model_dir) -> None:
    from relay.tasks.prompt_source import PromptSource
    from relay.tasks.run_tasks import RunTasks

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    cfg = _sums_cfg()
    source = SftSource.from_config(cfg, tokenizer, batch_size=4)
    grpo = PromptSource.from_config(cfg.data, tokenizer, batch_size=4)
    assert len(source.uids) == 16 and source.skipped == {} and source.cut == 0
    assert all(source.prompts[i] == grpo.prompt_ids[uid] for i, uid in enumerate(source.uids))
    held_out = {ex.uid for ex in RunTasks.from_config(cfg.data).read(None, "test", quiet=True)}
    val = SftSource.from_config(cfg, tokenizer, batch_size=4, split="val")
    assert set(val.uids) <= held_out and len(val.uids) == 4 and not set(source.uids) & held_out
    text = tokenizer.decode(source.responses[0].token_ids)
    assert "ones: " in text and "\\boxed{" in text


def test_worked_sums_of_a_task_without_sums_is_an_error_naming_the_keys(tiny_model_dir) -> None:
    import pytest

    from relay.data.gsm8k import DatasetError

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    cfg = OmegaConf.merge(_cfg(traces="worked_sums"), {"data": {"task": "gsm8k"}})
    with pytest.raises(DatasetError, match="sft.traces=worked_sums: none of the .* rows of data.task=gsm8k"):
        SftSource.from_config(cfg, tokenizer, batch_size=4)


def test_placed_worked_sums_are_the_same_rows_each_digit_placed_first(tiny_model_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    plain = SftSource.from_config(_sums_cfg(), tokenizer, batch_size=4)
    placed = SftSource.from_config(
        OmegaConf.merge(_sums_cfg(), {"sft": {"traces": "worked_sums_placed"}}), tokenizer, 4
    )
    assert placed.uids == plain.uids and placed.prompts == plain.prompts
    first_plain, first_placed = (tokenizer.decode(s.responses[0].token_ids) for s in (plain, placed))
    assert first_placed.endswith(first_plain) and first_placed.split("\n")[0].count(":") == 1
