"""``rollout.kv_cache_gib: auto``: the most blocks a step's groups hold at once, with the prompts' full blocks
shared by their samples (vLLM's prefix caching). Expected numbers worked out by hand in the comments."""

from relay.engines.kv_budget import group_kv_blocks, rollout_prompts, step_kv_cache_gib


def test_group_blocks_by_hand() -> None:
    # Blocks of 128, prompts up to 256, responses of 128, 4 samples.
    # p = 255: (255 - 1) // 128 = 1 shared; each sample 127 + 128 = 255 tokens -> 2 blocks; 1 + 4 x 2 = 9.
    # p = 256: vLLM recomputes the last prompt token, so only 1 block is shared; 128 + 128 -> 2 each: 9.
    # p = 128: nothing shared; 128 + 128 -> 2 each: 8. Without sharing: 4 x ceil(384 / 128) = 12.
    assert group_kv_blocks(256, 128, 4, 128) == 9
    # One sample: every token its own, ceil((256 + 256) / 128) = 4.
    assert group_kv_blocks(256, 256, 1, 128) == 4
    # A prompt shorter than a block shares nothing: ceil((100 + 28) / 128) = 1 each.
    assert group_kv_blocks(100, 28, 4, 128) == 4
    # GPU blocks of 16, prompts up to 512, 8 samples of 256: p = 511 -> 31 shared + 8 x ceil((15 + 256) / 16) = 167
    # blocks, against 8 x ceil(768 / 16) = 384 unshared.
    assert group_kv_blocks(512, 256, 8, 16) == 167


def test_step_budget_in_gib() -> None:
    per_token = 30 * 2 * 3 * 64 * 4  # SmolLM2-135M: layers x (K, V) x KV heads x head dim x float32
    # The step benchmark: 8 prompts x 4 samples, prompts up to 256, 128 new tokens: 8 x 9 blocks of 128.
    assert step_kv_cache_gib(30, 3, 64, "float32", 8, 4, 256, 128) == 8 * 9 * 128 * per_token / 2**30
    assert step_kv_cache_gib(30, 3, 64, "bfloat16", 8, 4, 256, 128) == 8 * 9 * 128 * per_token / 2 / 2**30
    assert rollout_prompts(8, 1) == 8 and rollout_prompts(8, 3) == 3 and rollout_prompts(16, 1, 4) == 4
