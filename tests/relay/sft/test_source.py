"""relay.sft.source: GSM8K traces tokenized once and served as the learner's batches, resumably; the learner's
supervised settings train on them."""

import numpy as np
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from relay.config.schema import RelayConfig
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
