#!/usr/bin/env bash
# Soak benchmark (docs/reliability.md "Soak"): starts ari-node (stories260K, loopback,
# own domain) and runs ari-soak against it for MINUTES, sampling the node's RSS.
#   scripts/soak.sh [BUILD_DIR] [MINUTES] [CLIENTS]
# Defaults: build-release, 10 minutes, 4 clients. Needs ../shared/models (stories260K)
# or ARI_MODELS_DIR. Output: the window table, RSS drift and the ledger; exit 0 when the
# ledger is clean. Scratch files go to a temp dir (removed at the end).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build-release}" && pwd)"
minutes="${2:-10}"
clients="${3:-4}"
models="${ARI_MODELS_DIR:-$root/../shared/models}"
domain="${ARI_SOAK_DOMAIN:-211}"
tmp="$(mktemp -d /tmp/ari_soak.XXXXXX)"
node_pid=""
cleanup() {
  if [[ -n "$node_pid" ]] && kill -0 "$node_pid" 2>/dev/null; then
    kill -TERM "$node_pid"; wait "$node_pid" || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$build/runtime/ari-convert" --checkpoint "$models/llama2c/stories260K/stories260K.bin" \
  --tokenizer "$models/llama2c/stories260K/tok512.bin" -o "$tmp/stories260K.gguf" >/dev/null
cp "$root/config/policy_default.textproto" "$tmp/policy.textproto"
cat > "$tmp/node.textproto" <<EOF
model_path: "stories260K.gguf"
policy_path: "policy.textproto"
dds { domain_id: $domain cyclone_config: "$root/config/cyclonedds-lo.xml" liveliness_lease_ms: 2000 }
session_slots: 4
max_context: 256
limits { max_max_tokens: 32 client_rate_per_s: 0 }
sensor { kind: SENSOR_AUTO }
status_period_ms: 500
threads: 1
shutdown_mode: SHUTDOWN_CANCEL
EOF
"$build/component/ari-node" --config "$tmp/node.textproto" 2> "$tmp/node.log" &
node_pid=$!
echo "ari-node pid $node_pid, domain $domain, $minutes min, $clients clients"
rc=0
"$build/component/ari-soak" --domain "$domain" --config "$root/config/cyclonedds-lo.xml" \
  --minutes "$minutes" --clients "$clients" --node-pid "$node_pid" --warmup-s 60 \
  --window-s 60 || rc=$?
grep -m2 -E "\] model |\] ready" "$tmp/node.log" || true
echo "node log: $(grep -c . "$tmp/node.log") lines; errors: $(grep -ci -E 'error|failed' "$tmp/node.log" || true)"
exit $rc
