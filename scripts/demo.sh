#!/usr/bin/env bash
# The README's demo: ARI as a DDS component on loopback.
#  1. convert the real stories260K llama2.c model to GGUF (or, when ../shared/models is
#     absent, make a random-weight tiny model with ari-synth and say so);
#  2. start ari-node with the shipped config (config/node.textproto) on DDS domain 42,
#     loopback only, and wait until it is ready (ari-cli status);
#  3. client "chat" sends a long NORMAL request, then client "nav" a CRITICAL one:
#     the CRITICAL answer streams first, the NORMAL one resumes afterwards;
#  4. show the governor's decisions (node log + ari-cli watch);
#  5. stop the node by its PID with SIGTERM and check it exits 0.
set -euo pipefail
BUILD="${1:?usage: demo.sh <build dir>}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${ARI_MODELS_DIR:-$ROOT/../shared/models}"
OUT="$BUILD/demo"
DOMAIN="${ARI_DEMO_DOMAIN:-42}"
mkdir -p "$OUT"
BIN="$BUILD/runtime"
NODE="$BUILD/component/ari-node"
CLI=("$BUILD/component/ari-cli" --domain "$DOMAIN")

S260="$MODELS_DIR/llama2c/stories260K"
if [[ -f "$S260/stories260K.bin" && -f "$S260/tok512.bin" ]]; then
  echo "== Converting the real stories260K model (llama2.c) to GGUF"
  "$BIN/ari-convert" --checkpoint "$S260/stories260K.bin" --tokenizer "$S260/tok512.bin" \
      -o "$OUT/stories260K.gguf"
  MODEL="$OUT/stories260K.gguf"
  PROMPT_N="Once upon a time, there was a little dog"
  PROMPT_C="Lily saw a big red car"
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
  PROMPT_N="Hello"
  PROMPT_C="Route"
fi

echo "== Starting ari-node (domain $DOMAIN, loopback config, log: $OUT/node.log)"
"$NODE" --config "$ROOT/config/node.textproto" --model "$MODEL" --domain "$DOMAIN" \
    >"$OUT/node.log" 2>&1 &
NODE_PID=$!
cleanup() { kill -TERM "$NODE_PID" 2>/dev/null || true; }
trap cleanup EXIT
"${CLI[@]}" status --timeout-ms 15000
grep "ready in" "$OUT/node.log" || true

"${CLI[@]}" --client watch watch --duration-ms 20000 >"$OUT/watch.log" 2>&1 &
WATCH_PID=$!

echo
echo "== chat: long NORMAL request; 0.4 s later nav: CRITICAL request"
"${CLI[@]}" --client chat ask --urgency normal --max-tokens 200 --chunks "$PROMPT_N" \
    >"$OUT/normal.out" 2>"$OUT/normal.err" &
CHAT_PID=$!
sleep 0.4
set +e
"${CLI[@]}" --client nav ask --urgency critical --deadline-ms 5000 --max-tokens 48 --chunks \
    "$PROMPT_C" >"$OUT/critical.out" 2>"$OUT/critical.err"
NAV_RC=$?
wait "$CHAT_PID"
CHAT_RC=$?
set -e
kill -TERM "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true

echo "-- both streams merged by arrival time (time, client, chunk #, text):"
sort -s -k1,1 "$OUT/normal.out" "$OUT/critical.out" |
  awk '{c=$2; if (c!=last) {print; n=0} else if (++n<3) print; else if (n==3) print "   ..."; last=c}'
echo "-- results:"
cat "$OUT/critical.err" "$OUT/normal.err" | grep -v '^request '
echo "   (exit codes: nav $NAV_RC, chat $CHAT_RC)"
echo
echo "-- the governor's decisions (node log):"
grep -E "decision|DONE|CANCELLED|REJECTED" "$OUT/node.log" | cut -c1-160
echo "-- NodeStatus as seen by 'ari-cli watch' (first lines):"
head -n 4 "$OUT/watch.log" | cut -c1-200

echo
echo "== Stopping ari-node (PID $NODE_PID) with SIGTERM"
trap - EXIT
kill -TERM "$NODE_PID"
set +e
wait "$NODE_PID"
NODE_RC=$?
set -e
tail -n 2 "$OUT/node.log"
if [[ $NODE_RC -ne 0 ]]; then
  echo "ari-node exited with $NODE_RC (expected 0)"
  exit 1
fi
echo "ari-node exited 0"
[[ $NAV_RC -eq 0 && $CHAT_RC -eq 0 ]]
