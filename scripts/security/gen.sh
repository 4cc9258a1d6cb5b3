#!/usr/bin/env bash
# Generates a DDS Security test setup for ARI into OUT_DIR (never into the repo: the
# private keys are throw-away test keys):
#   ca.pem/ca.key                 test CA (identity CA and permissions CA)
#   <name>.pem/<name>.key         identity of the node and of every client (CN=<name>)
#   governance.p7s                signed governance (config/security/governance.xml)
#   permissions.p7s               signed permissions: the node may read requests (also in
#                                 partition ari-critical) and control commands and write
#                                 chunks/status; every listed publisher may write requests
#                                 and cancels (a --critical-client also requests in
#                                 partition ari-critical, a --controller also STANDBY /
#                                 RESUME on ari/v2/control); readers may only read
#   cyclonedds-<name>.xml         loopback Cyclone config with the Security section
#                                 (from config/cyclonedds-secure.xml.in) per identity
#
# usage: scripts/security/gen.sh OUT_DIR [--node NAME] [--client NAME]...
#                                 [--critical-client NAME]... [--controller NAME]...
#                                 [--reader NAME]... [--node-without-critical]
#   --node NAME    the ari-node identity (default: ari-node)
#   --client NAME  an app allowed to publish Requests (repeatable)
#   --critical-client NAME  as --client, and may publish Requests in the DDS partition
#                  ari-critical: the CRITICAL right in DDS access control (the client
#                  library writes CRITICAL there, the node reads it there; docs/deployment.md
#                  "Security")
#   --controller NAME  as --client, and may publish on ari/v2/control: the right to put
#                  the node in standby and resume it (docs/memory.md "Memory yield"); any
#                  other identity's control writer is refused by DDS access control
#   --node-without-critical  the node may NOT subscribe in partition ari-critical (tests:
#                  such a node serves no CRITICAL request under DDS Security)
#   --reader NAME  an authenticated app that may only read chunks/status (repeatable)
# Needs: openssl (Debian package `openssl`), Cyclone's security plugins (libddsc0debian).
# Which clients may ask CRITICAL: ari-node's config lists their certificates
# (security { critical_identity_certs: "<name>.pem" }); the ari-critical partition grant
# is the DDS-side half of the same right (docs/deployment.md "Security").
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: gen.sh OUT_DIR [--node NAME] [--client NAME]... [--reader NAME]...}"
shift
node="ari-node"
clients=()
critical=()
controllers=()
readers=()
node_critical="ari/v2/request"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --node) node="$2"; shift 2 ;;
    --client) clients+=("$2"); shift 2 ;;
    --critical-client) clients+=("$2"); critical+=("$2"); shift 2 ;;
    --controller) clients+=("$2"); controllers+=("$2"); shift 2 ;;
    --reader) readers+=("$2"); shift 2 ;;
    --node-without-critical) node_critical=""; shift ;;
    *) echo "gen.sh: unknown argument $1" >&2; exit 1 ;;
  esac
done
command -v openssl >/dev/null || { echo "gen.sh: openssl not found" >&2; exit 2; }

# Cyclone's plugins (Debian installs them outside the linker path).
plugin_dir=""
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || true)"
for d in "/usr/lib/$multiarch/libddsc0debian" "/usr/lib/$multiarch" /usr/local/lib; do
  if [[ -f "$d/libdds_security_auth.so" ]]; then plugin_dir="${d%/}"; break; fi
done
[[ -n "$plugin_dir" ]] || { echo "gen.sh: libdds_security_auth.so not found" >&2; exit 3; }

mkdir -p "$out"
out="$(cd "$out" && pwd)"
umask 077
subj() { echo "/C=DE/O=ARI Test/CN=$1"; }

# CA (EC P-256: small and fast).
openssl ecparam -name prime256v1 -genkey -noout -out "$out/ca.key" 2>/dev/null
openssl req -x509 -new -key "$out/ca.key" -sha256 -days 3650 -subj "$(subj ari-test-ca)" \
  -out "$out/ca.pem" 2>/dev/null

ident() {
  local name="$1"
  openssl ecparam -name prime256v1 -genkey -noout -out "$out/$name.key" 2>/dev/null
  openssl req -new -key "$out/$name.key" -subj "$(subj "$name")" -out "$out/$name.csr" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -CAcreateserial -sha256 -days 3650 -out "$out/$name.pem" 2>/dev/null
  rm -f "$out/$name.csr"
}

# Permissions: one grant per identity (subject names as the certificates carry them).
# rules() kind topics [partition]: one <publish>/<subscribe> rule, in `partition` if given.
rules() {
  local kind="$1" topics="$2" partition="${3:-}"
  [[ -n "$topics" ]] || return 0
  echo "        <$kind><topics>"
  for t in $topics; do echo "          <topic>$t</topic>"; done
  if [[ -n "$partition" ]]; then
    echo "        </topics><partitions><partition>$partition</partition></partitions></$kind>"
  else
    echo "        </topics></$kind>"
  fi
}

grant() {  # name, publish topics, subscribe topics[, ari-critical publish, ... subscribe]
  local name="$1" pub="$2" sub="$3" crit_pub="${4:-}" crit_sub="${5:-}"
  cat <<EOF
    <grant name="$name">
      <subject_name>CN=$name,O=ARI Test,C=DE</subject_name>
      <validity><not_before>2020-01-01T00:00:00</not_before><not_after>2099-01-01T00:00:00</not_after></validity>
      <allow_rule>
        <domains><id_range><min>0</min><max>229</max></id_range></domains>
EOF
  rules publish "$pub"
  rules publish "$crit_pub" ari-critical
  rules subscribe "$sub"
  rules subscribe "$crit_sub" ari-critical
  cat <<EOF
      </allow_rule>
      <default>DENY</default>
    </grant>
EOF
}

ident "$node"
for c in "${clients[@]}" "${readers[@]}"; do ident "$c"; done
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
  echo '     xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_permissions.xsd">'
  echo '  <permissions>'
  grant "$node" "ari/v2/token_chunk ari/v2/node_status" \
    "ari/v2/request ari/v2/cancel ari/v2/control" "" "$node_critical"
  for c in "${clients[@]}"; do
    crit_pub=""
    pub="ari/v2/request ari/v2/cancel"
    for k in "${critical[@]}"; do [[ "$k" == "$c" ]] && crit_pub="ari/v2/request"; done
    for k in "${controllers[@]}"; do [[ "$k" == "$c" ]] && pub="$pub ari/v2/control"; done
    grant "$c" "$pub" "ari/v2/token_chunk ari/v2/node_status" "$crit_pub"
  done
  for r in "${readers[@]}"; do
    grant "$r" "" "ari/v2/token_chunk ari/v2/node_status"
  done
  echo '  </permissions>'
  echo '</dds>'
} > "$out/permissions.xml"

cp "$root/config/security/governance.xml" "$out/governance.xml"
for doc in governance permissions; do
  openssl smime -sign -in "$out/$doc.xml" -text -out "$out/$doc.p7s" \
    -signer "$out/ca.pem" -inkey "$out/ca.key" 2>/dev/null
done

for name in "$node" "${clients[@]}" "${readers[@]}"; do
  sed -e "s|@PLUGIN_DIR@|$plugin_dir|g" -e "s|@DIR@|$out|g" -e "s|@NAME@|$name|g" \
    "$root/config/cyclonedds-secure.xml.in" > "$out/cyclonedds-$name.xml"
done
chmod 0644 "$out"/*.pem "$out"/*.p7s "$out"/*.xml
echo "$out"
