#!/usr/bin/env bash
# The README's demo. Until the DDS component lands: convert the real stories260K
# llama2.c model to GGUF and generate text with ari-run (or, when ../shared/models
# is absent, generate a random-weight tiny model with ari-synth and say so).
set -euo pipefail
BUILD="${1:?usage: demo.sh <build dir>}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${ARI_MODELS_DIR:-$ROOT/../shared/models}"
OUT="$BUILD/demo"
mkdir -p "$OUT"
BIN="$BUILD/runtime"

S260="$MODELS_DIR/llama2c/stories260K"
if [[ -f "$S260/stories260K.bin" && -f "$S260/tok512.bin" ]]; then
  echo "== Converting the real stories260K model (llama2.c) to GGUF"
  "$BIN/ari-convert" --checkpoint "$S260/stories260K.bin" --tokenizer "$S260/tok512.bin" \
      -o "$OUT/stories260K.gguf"
  MODEL="$OUT/stories260K.gguf"
  PROMPT="Once upon a time"
else
  echo "== $MODELS_DIR not found: using a RANDOM-WEIGHT tiny model made by ari-synth"
  echo "   (its text is gibberish by construction; it shows the pipeline, not quality)"
  VOCAB="$MODELS_DIR/vocab/ggml-vocab-llama-spm.gguf"
  if [[ -f "$VOCAB" ]]; then
    "$BIN/ari-synth" --preset tiny --vocab "$VOCAB" --type f32 --seed 1 -o "$OUT/tiny.gguf"
  else
    "$BIN/ari-synth" --preset tiny --type f32 --seed 1 -o "$OUT/tiny.gguf"
  fi
  MODEL="$OUT/tiny.gguf"
  PROMPT="Hello"
fi

echo "== ari-run, greedy"
"$BIN/ari-run" -m "$MODEL" -p "$PROMPT" -n 128 --temp 0
echo
echo "== ari-run, sampled (temperature 0.8, top-p 0.9, seed 42)"
"$BIN/ari-run" -m "$MODEL" -p "$PROMPT" -n 128 --temp 0.8 --top-p 0.9 --seed 42
echo
