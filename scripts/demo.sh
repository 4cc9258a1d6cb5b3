#!/usr/bin/env bash
# The README's demo: ARI as a DDS component on loopback, on the governed path.
#  1. convert the real stories260K llama2.c model to GGUF and pack it with layer importance
#     (ari-pack --calibrate), so every knob the governor decides can run (or, when
#     ../shared/models is absent, a random-weight tiny model made by ari-synth, said so);
#  2. start ari-node with the shipped config (config/node.textproto) on DDS domain 42,
#     loopback only, its temperature replayed from a short heat ramp
#     (scripts/demo_heat_ramp.csv: 55 C -> 97 C -> 60 C in 20 s; the policy's band dwell
#     times shortened to 0.5 s so the ramp crosses every band), and wait until it is ready;
#  3. client "chat" sends a long NORMAL request, then client "nav" a CRITICAL one:
#     the CRITICAL answer streams first, the NORMAL one resumes afterwards; every chunk
#     line carries what ran (precision, ISA, threads, CPUs observed, layers dropped, KV);
#  4. during the ramp, client "assistant" asks short HIGH requests: the table shows
#     precision, cores, chunk size and layer drop change with the band, as they ran;
#  5. show the governor's decisions (node log + ari-cli watch);
#  6. client "nav" sends a CRITICAL navigation command constrained by the registered schema
#     navigation_destination (config/schemas/): the answer is JSON, ends FORMAT_COMPLETE,
#     and is parsed and checked here by Python's json module (no code shared with ARI);
#  7. slot parking (docs/scheduler.md): a short-lived second node ari-node-park (same domain,
#     every request pinned to it) runs the demo policy with critical_reserved_slots: 0 and
#     longer NORMAL/HIGH pauses; client "chat2" (NORMAL) and "media" (HIGH) fill both
#     session slots, then "nav" sends a CRITICAL request: the NORMAL turn is parked at a
#     chunk boundary, CRITICAL runs in its slot, the NORMAL turn resumes later; shown: the
#     merged streams, the node log's park/resume lines, every result (all must be DONE, and
#     the park must be there); then memory yield on the same node: ari-cli control standby
#     (the node releases its model pages and KV arena, NodeStatus says so with its RSS), a
#     CRITICAL request answered meanwhile (auto-resume), ari-cli control resume; the node
#     is stopped by PID with SIGTERM and must exit 0;
#  8. with --nodes 2 only: a second ari-node (node id ari-node-2) joins the domain; a long
#     BACKGROUND request is pinned to the first node, and a CRITICAL navigation prompt,
#     routed by the client library (docs/routing.md), goes to the idle second node;
#  9. stop the node(s) by PID with SIGTERM and check they exit 0.
set -euo pipefail
BUILD="${1:?usage: demo.sh <build dir> [--nodes 1|2]}"
NODES=1
if [[ "${2:-}" == "--nodes" ]]; then NODES="${3:?--nodes needs 1 or 2}"; fi
[[ "$NODES" == 1 || "$NODES" == 2 ]] || { echo "demo.sh: --nodes 1 or 2" >&2; exit 1; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${ARI_MODELS_DIR:-$ROOT/../shared/models}"
mkdir -p "$BUILD/demo"
OUT="$(cd "$BUILD/demo" && pwd)"
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
  echo "== Packing it (W8 + W4 layouts, layer importance from tests/data/calibration.txt)"
  "$BIN/ari-pack" "$OUT/stories260K.gguf" "$OUT/stories260K.pack.gguf" \
      --calibrate "$ROOT/tests/data/calibration.txt"
  MODEL="$OUT/stories260K.pack.gguf"
  PROMPT_N="Once upon a time, there was a little dog"
  PROMPT_C="Lily saw a big red car"
else
  echo "== $MODELS_DIR not found: using a RANDOM-WEIGHT tiny model made by ari-synth"
  echo "   (its text is gibberish by construction; it shows the pipeline, not quality)"
  VOCAB="$MODELS_DIR/vocab/ggml-vocab-llama-spm.gguf"
  if [[ ! -f "$VOCAB" ]]; then  # ari-synth needs a real vocabulary; none is committed
    echo "demo.sh: neither $S260/stories260K.bin nor $VOCAB found: set ARI_MODELS_DIR" \
         "to the shared models folder (../shared/models)" >&2
    exit 2
  fi
  "$BIN/ari-synth" --preset tiny --vocab "$VOCAB" --type f32 --seed 1 -o "$OUT/tiny.gguf"
  "$BIN/ari-pack" "$OUT/tiny.gguf" "$OUT/tiny.pack.gguf"
  MODEL="$OUT/tiny.pack.gguf"
  PROMPT_N="Hello"
  PROMPT_C="Route"
fi

# The shipped config and policy, with the sensor replaced by the demo's heat ramp and the
# bands' dwell times shortened (a demo of 20 s instead of minutes in each band); room for
# the JSON answer (stories260K spells a destination in many small tokens).
sed -E 's/min_dwell_ms: [0-9]+/min_dwell_ms: 500/' "$ROOT/config/policy_default.textproto" \
    >"$OUT/policy_demo.textproto"
sed -E -e "s|^policy_path: .*|policy_path: \"$OUT/policy_demo.textproto\"|" \
    -e "s|cyclone_config: \"cyclonedds-lo.xml\"|cyclone_config: \"$ROOT/config/cyclonedds-lo.xml\"|" \
    -e "s|^sensor \{.*|sensor { kind: SENSOR_REPLAY replay_csv: \"$ROOT/scripts/demo_heat_ramp.csv\" }|" \
    -e "s|path: \"schemas/|path: \"$ROOT/config/schemas/|" \
    -e "s|max_max_tokens: [0-9]+|max_max_tokens: 448|" \
    "$ROOT/config/node.textproto" >"$OUT/node_demo.textproto"

echo "== Starting ari-node (domain $DOMAIN, loopback config, replayed heat ramp, log: $OUT/node.log)"
"$NODE" --config "$OUT/node_demo.textproto" --model "$MODEL" --domain "$DOMAIN" \
    >"$OUT/node.log" 2>&1 &
NODE_PID=$!
START_MS=$(date +%s%3N)
PARK_PID=""  # the slot parking step's node while it runs
cleanup() { kill -TERM "$NODE_PID" ${PARK_PID:+"$PARK_PID"} 2>/dev/null || true; }
trap cleanup EXIT
"${CLI[@]}" status --timeout-ms 15000
grep "ready in" "$OUT/node.log" || true

"${CLI[@]}" --client watch watch --duration-ms 20000 >"$OUT/watch.log" 2>&1 &
WATCH_PID=$!

echo
echo "== chat: long NORMAL request; 0.4 s later nav: CRITICAL request"
"${CLI[@]}" --client chat ask --urgency normal --max-tokens 256 --chunks "$PROMPT_N" \
    >"$OUT/normal.out" 2>"$OUT/normal.err" &
CHAT_PID=$!
sleep 0.15
set +e
"${CLI[@]}" --client nav ask --urgency critical --deadline-ms 5000 --max-tokens 48 --chunks \
    "$PROMPT_C" >"$OUT/critical.out" 2>"$OUT/critical.err"
NAV_RC=$?
wait "$CHAT_PID"
CHAT_RC=$?
set -e
kill -TERM "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true

# One line per chunk: time, client, chunk #, text, and what ran (the [ran ... | decided
# ...] line ari-cli prints under each chunk, cut to what ran).
join_ran() { awk '/^    \[ran /{sub(/^    \[/, ""); sub(/ \|.*/, ""); printf "%s  | %s\n", line, $0; next}
                  {line=$0}' "$1"; }
echo "-- both streams merged by arrival time (time, client, chunk #, text | what ran):"
sort -s -k1,1 <(join_ran "$OUT/normal.out") <(join_ran "$OUT/critical.out") |
  awk '{c=$2; if (c!=last) {print; n=0} else if (++n<3) print; else if (n==3) print "   ..."; last=c}'
echo "-- results:"
cat "$OUT/critical.err" "$OUT/normal.err" | grep -v '^request '
echo "   (exit codes: nav $NAV_RC, chat $CHAT_RC)"
echo

elapsed_ms() { echo $(( $(date +%s%3N) - START_MS )); }
echo "== Heat ramp (replayed sensor): 55 C to 5 s, 78 C (warm) 5-8 s, 90 C (hot) 8-11 s,"
echo "   97 C (critical) 11-14 s, 88 C 14-17 s, then 60 C. Client 'assistant' asks short HIGH"
echo "   requests; per request, what its second chunk ran next to what was decided:"
HIGH_RC=0
while (( $(elapsed_ms) < 19500 )); do
  if ! "${CLI[@]}" --client assistant ask --urgency high --max-tokens 12 --chunks "$PROMPT_C" \
      >"$OUT/high.out" 2>"$OUT/high.err"; then
    HIGH_RC=1
    cat "$OUT/high.err"
  fi
  line=$(grep '^    \[ran ' "$OUT/high.out" | sed -n 2p | sed -E 's/^    \[//; s/\]$//')
  t=$(elapsed_ms)
  printf "  %3d.%d s  %s\n" $((t / 1000)) $((t % 1000 / 100)) "$line"
  sleep 0.5
done
echo "-- the HIGH decisions as the bands changed (node log: chunk = prefill/decode tokens):"
grep -E "decision HIGH" "$OUT/node.log" | sed -E 's/^.*decision //' | cut -c1-150 | uniq
echo
echo "-- the governor's decisions (node log):"
grep -E "decision|DONE|CANCELLED|REJECTED" "$OUT/node.log" | cut -c1-160
echo "-- NodeStatus as seen by 'ari-cli watch' (first lines):"
head -n 4 "$OUT/watch.log" | cut -c1-200

echo
echo "== nav: CRITICAL navigation command, answer constrained by the registered JSON schema"
echo "   navigation_destination (ari-cli ask --schema-name navigation_destination)"
set +e
"${CLI[@]}" --client nav ask --urgency critical --deadline-ms 10000 --max-tokens 448 \
    --schema-name navigation_destination "$PROMPT_C" >"$OUT/nav_json.out" 2>"$OUT/nav_json.err"
JSON_RC=$?
set -e
echo "-- the answer (streamed text):"
cat "$OUT/nav_json.out"
grep -v '^request ' "$OUT/nav_json.err" || true
grep -q "structured output: FORMAT_COMPLETE" "$OUT/nav_json.err" || JSON_RC=1
if command -v python3 >/dev/null; then
  echo "-- checked outside ARI (Python json + the schema's required fields and enums):"
  python3 - "$OUT/nav_json.out" "$ROOT/config/schemas/navigation_destination.json" <<'PY' ||
import json, sys
answer = json.load(open(sys.argv[1]))
schema = json.load(open(sys.argv[2]))
props = schema["properties"]
missing = [k for k in schema.get("required", []) if k not in answer]
extra = [k for k in answer if k not in props]
bad = [k for k, v in answer.items()
       if k in props and "enum" in props[k] and v not in props[k]["enum"]]
bad += [k for k, v in answer.items() if k in props and "const" in props[k] and v != props[k]["const"]]
print("   parsed:", json.dumps(answer, ensure_ascii=False))
print("   required present: %s, unknown keys: %s, enum/const violations: %s"
      % (not missing, extra or "none", bad or "none"))
sys.exit(1 if missing or extra or bad else 0)
PY
    JSON_RC=1
fi
echo "   (exit code: nav JSON $JSON_RC)"

PARK_RC=0
echo
echo "== Slot parking: both session slots busy (NORMAL + HIGH), then a CRITICAL request"
echo "   A second, short-lived node ari-node-park (every request here is pinned to it with"
echo "   ari-cli ask --node; log: $OUT/node_park.log) runs the demo policy with"
echo "   critical_reserved_slots: 0, so NORMAL and HIGH can take both session slots, and pauses"
echo "   per chunk of 10 ms (NORMAL) and 40 ms (HIGH), so both still run when CRITICAL arrives;"
echo "   its sensor replays a flat 55 C:"
sed -E -e 's/^critical_reserved_slots: [0-9]+/critical_reserved_slots: 0/' \
    -e '/urgency: NORMAL band: "normal"/s/pause_ms: [0-9]+/pause_ms: 10/' \
    -e '/urgency: HIGH band: "normal"/s/pause_ms: [0-9]+/pause_ms: 40/' \
    "$OUT/policy_demo.textproto" >"$OUT/policy_park.textproto"
{ echo "time_s,celsius"; for t in $(seq 0 120); do echo "$t,55"; done; } >"$OUT/flat_55c.csv"
sed -E -e "s|^policy_path: .*|policy_path: \"$OUT/policy_park.textproto\"|" \
    -e 's|node_id: "ari-node"|node_id: "ari-node-park"|' \
    -e "s|^sensor \{.*|sensor { kind: SENSOR_REPLAY replay_csv: \"$OUT/flat_55c.csv\" }|" \
    "$OUT/node_demo.textproto" >"$OUT/node_park.textproto"
# Memory yield on command (step 7b) on the same node: loopback without DDS Security, so the
# control topic needs the explicit opt-in (on a head unit DDS Security decides who may send).
echo 'standby { enabled: true accept_without_security: true }' >>"$OUT/node_park.textproto"
grep -hE '^(critical_reserved_slots|session_slots):|urgency: (NORMAL|HIGH) band: "normal"' \
    "$OUT/node_park.textproto" "$OUT/policy_park.textproto" |
  sed -E 's/ +#.*//; s/core_class.*(pause_ms: [0-9]+).*/... \1 .../; s/^/   /'
"$NODE" --config "$OUT/node_park.textproto" --model "$MODEL" --domain "$DOMAIN" \
    >"$OUT/node_park.log" 2>&1 &
PARK_PID=$!
for _ in $(seq 100); do grep -q "ready in" "$OUT/node_park.log" && break; sleep 0.1; done
grep "ready in" "$OUT/node_park.log" || true
# Waits (up to 5 s) for the first chunk of an `ask --chunks` output file.
first_chunk() {
  for _ in $(seq 500); do grep -q '^    \[ran ' "$1" && return 0; sleep 0.01; done
  return 1
}
chunks_of() { grep -c '^    \[ran ' "$1" || true; }
set +e
"${CLI[@]}" --client chat2 ask --node ari-node-park --urgency normal --max-tokens 448 --chunks \
    "$PROMPT_N" >"$OUT/park_normal.out" 2>"$OUT/park_normal.err" &
PN_PID=$!
first_chunk "$OUT/park_normal.out"
"${CLI[@]}" --client media ask --node ari-node-park --urgency high --max-tokens 448 --chunks \
    "$PROMPT_N" >"$OUT/park_high.out" 2>"$OUT/park_high.err" &
PH_PID=$!
first_chunk "$OUT/park_high.out"
echo "-- chat2 (NORMAL, $(chunks_of "$OUT/park_normal.out") chunks so far) and media (HIGH," \
     "$(chunks_of "$OUT/park_high.out") so far) are streaming; now nav: CRITICAL, deadline 3 s"
"${CLI[@]}" --client nav ask --node ari-node-park --urgency critical --deadline-ms 3000 \
    --max-tokens 32 --chunks "$PROMPT_C" >"$OUT/park_critical.out" 2>"$OUT/park_critical.err"
PC_RC=$?
wait "$PN_PID"
PN_RC=$?
wait "$PH_PID"
PH_RC=$?
set -e
echo "-- the three streams merged by arrival time (time, client, chunk #, text):"
sort -s -k1,1 <(grep -hv '^    \[' "$OUT/park_normal.out" "$OUT/park_high.out" \
    "$OUT/park_critical.out") |
  awk '{c=$2; if (c!=last) {print; n=0} else if (++n<2) print; else if (n==2) print "   ..."; last=c}'
echo "   (chat2 resumes when media ends: after a HIGH chunk its pause holds NORMAL back too,"
echo "   docs/scheduler.md \"Pacing\")"
echo "-- node log (ari-node-park; request ids in arrival order: 1 chat2, 2 media, 3 nav):"
grep -E "slot parking|DONE|CANCELLED|FAILED|DEADLINE|REJECTED" "$OUT/node_park.log" |
  sed 's/^\[ari-node\] /   /' | cut -c1-150 || true
echo "-- results:"
cat "$OUT/park_critical.err" "$OUT/park_normal.err" "$OUT/park_high.err" | grep -v '^request ' ||
  true
echo "   (exit codes: nav $PC_RC, chat2 $PN_RC, media $PH_RC)"
if grep -q "slot parking: request 1 parked (slot [0-9]*, for 3," "$OUT/node_park.log" &&
    grep -q "slot parking: request 1 resumed" "$OUT/node_park.log"; then
  echo "   chat2's NORMAL turn was parked for nav's CRITICAL one and resumed afterwards"
else
  echo "   expected chat2's turn (request 1) parked for nav's (request 3) and resumed"
  PARK_RC=1
fi
grep -q "^nav DONE:" "$OUT/park_critical.err" || PARK_RC=1
grep -q "^chat2 DONE:" "$OUT/park_normal.err" || PARK_RC=1
grep -q "^media DONE:" "$OUT/park_high.err" || PARK_RC=1
[[ $PC_RC -eq 0 && $PN_RC -eq 0 && $PH_RC -eq 0 ]] || PARK_RC=1

echo
echo "== Memory yield: the platform's memory manager sends STANDBY on ari/v2/control (speech"
echo "   recognition needs the RAM), a CRITICAL request comes in meanwhile, then RESUME"
echo "   (docs/memory.md \"Memory yield on command\")"
set +e
"${CLI[@]}" --client memory-manager control standby --node ari-node-park 2>&1 | sed 's/^/   /'
SB_RC=${PIPESTATUS[0]}
"${CLI[@]}" --client nav ask --node ari-node-park --urgency critical --deadline-ms 3000 \
    --max-tokens 16 "$PROMPT_C" >"$OUT/standby_critical.out" 2>"$OUT/standby_critical.err"
SC_RC=$?
"${CLI[@]}" --client memory-manager control resume --node ari-node-park 2>&1 | sed 's/^/   /'
RS_RC=${PIPESTATUS[0]}
set -e
grep -v '^request ' "$OUT/standby_critical.err" | sed 's/^/   /' || true
echo "-- node log:"
grep -E "control:|standby:" "$OUT/node_park.log" | sed 's/^\[ari-node\] /   /' | cut -c1-150 ||
  true
grep -q "standby: released" "$OUT/node_park.log" || SB_RC=1
grep -q "auto-resumed for a CRITICAL request" "$OUT/node_park.log" || SC_RC=1
echo "   (exit codes: standby $SB_RC, CRITICAL in standby $SC_RC, resume $RS_RC)"
[[ $SB_RC -eq 0 && $SC_RC -eq 0 && $RS_RC -eq 0 ]] || PARK_RC=1
echo "== Stopping ari-node-park (PID $PARK_PID) with SIGTERM"
kill -TERM "$PARK_PID" 2>/dev/null || true  # if it died already, wait says how
set +e
wait "$PARK_PID"
PARK_NODE_RC=$?
set -e
PARK_PID=""
if [[ $PARK_NODE_RC -eq 0 ]]; then
  echo "   ari-node-park exited 0"
else
  echo "   ari-node-park exited with $PARK_NODE_RC (expected 0)"
  PARK_RC=1
fi
echo "   (exit code: slot parking $PARK_RC)"

ROUTE_RC=0
if [[ "$NODES" == 2 ]]; then
  echo
  echo "== Two nodes: ari-node-2 joins domain $DOMAIN (log: $OUT/node2.log)"
  sed -E 's|node_id: "ari-node"|node_id: "ari-node-2"|' "$OUT/node_demo.textproto" \
      >"$OUT/node2_demo.textproto"
  "$NODE" --config "$OUT/node2_demo.textproto" --model "$MODEL" --domain "$DOMAIN" \
      >"$OUT/node2.log" 2>&1 &
  NODE2_PID=$!
  cleanup() { kill -TERM "$NODE_PID" "$NODE2_PID" 2>/dev/null || true; }
  trap cleanup EXIT
  for _ in $(seq 100); do grep -q "ready in" "$OUT/node2.log" && break; sleep 0.1; done
  grep "ready in" "$OUT/node2.log" || true
  sleep 1.2  # both nodes' NodeStatus (1 s period) reach the clients
  echo "-- summary: a long BACKGROUND request pinned to ari-node (ari-cli ask --node ari-node);"
  echo "   1.2 s later nav: CRITICAL, not pinned: the client library routes it"
  "${CLI[@]}" --client summary ask --urgency background --max-tokens 256 --node ari-node \
      "$PROMPT_N" \
      >"$OUT/normal2.out" 2>"$OUT/normal2.err" &
  CHAT2_PID=$!
  sleep 1.2  # ari-node's next NodeStatus shows its busy slot
  set +e
  "${CLI[@]}" --client nav ask --urgency critical --deadline-ms 5000 --max-tokens 24 \
      "$PROMPT_C" >"$OUT/critical2.out" 2>"$OUT/critical2.err"
  ROUTE_RC=$?
  wait "$CHAT2_PID" || ROUTE_RC=1
  set -e
  grep -h '^request \|DONE' "$OUT/normal2.err" "$OUT/critical2.err" | cut -c1-140
  if grep -q -- "-> node ari-node-2" "$OUT/critical2.err" &&
      grep -q "(CRITICAL)" "$OUT/node2.log"; then
    echo "   the CRITICAL request went to the idle node ari-node-2, which answered it:"
    grep "(CRITICAL)" "$OUT/node2.log" | tail -n 1 | cut -c1-140
  else
    echo "   expected the CRITICAL request on ari-node-2 (see $OUT/critical2.err)"
    ROUTE_RC=1
  fi
  echo "== Stopping ari-node-2 (PID $NODE2_PID) with SIGTERM"
  kill -TERM "$NODE2_PID"
  set +e
  wait "$NODE2_PID"
  NODE2_RC=$?
  set -e
  tail -n 3 "$OUT/node2.log" | cut -c1-160
  [[ $NODE2_RC -eq 0 ]] || { echo "ari-node-2 exited with $NODE2_RC (expected 0)"; ROUTE_RC=1; }
fi

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
[[ $NAV_RC -eq 0 && $CHAT_RC -eq 0 && $HIGH_RC -eq 0 && $JSON_RC -eq 0 && $PARK_RC -eq 0 &&
   $ROUTE_RC -eq 0 ]]
