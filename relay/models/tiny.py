"""Tiny random-initialised Llama checkpoints with the real SmolLM2 tokenizer, for tests and smoke runs.

python -m relay.models.tiny --out /tmp/tiny-llama
"""

from __future__ import annotations

import argparse
from pathlib import Path

from relay.models.prepare_smollm2 import ensure_model


def build_tiny_llama(
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    num_hidden_layers: int = 2,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_attention_heads: int = 2,  # head_dim 32: the smallest vLLM's CPU attention supports
    num_key_value_heads: int = 1,
    tie_word_embeddings: bool = True,
    seed: int = 0,
) -> Path:
    """Save a random ``LlamaForCausalLM`` (float32) plus the SmolLM2 tokenizer to ``out_dir``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir or ensure_model()))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="write a tiny random Llama checkpoint")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--untied", action="store_true", help="separate lm_head weights")
    args = parser.parse_args()
    print(build_tiny_llama(args.out, tie_word_embeddings=not args.untied))


if __name__ == "__main__":
    main()
