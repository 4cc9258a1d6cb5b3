#!/usr/bin/env bash
# ARI: one entry point for a fresh Debian 12 machine (run as root).
#   ./ari.sh demo    install packages, build (Release), run the demo
#   ./ari.sh test    install packages, build Release + ASan/UBSan, run the whole suite in both
#   ./ari.sh setup   only install the Debian packages (idempotent; seconds when present)
#   ./ari.sh build   only the Release build
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JOBS="${ARI_JOBS:-2}"
MODELS_DIR="${ARI_MODELS_DIR:-$ROOT/../shared/models}"
export ARI_MODELS_DIR="$MODELS_DIR"

# Every Debian package the project uses, and why.
PACKAGES=(
  cmake g++ make ccache pkg-config        # toolchain; ccache keeps rebuilds cheap
  cyclonedds-dev cyclonedds-tools         # DDS (C API) and idlc
  iceoryx libiceoryx-posh-dev             # shared memory transport (iox-roudi)
  libprotobuf-dev protobuf-compiler       # policy, config, drive logs
  libsensors-dev                          # temperature via lm-sensors
  libgtest-dev libgmock-dev               # tests
  libbenchmark-dev                        # micro-benchmarks
  libicu-dev                              # Unicode categories/regex for tokenizer pre-splitting
)

log() { printf '\033[1m[ari]\033[0m %s\n' "$*" >&2; }

setup() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    log "packages: all ${#PACKAGES[@]} present"
    return
  fi
  log "installing: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    log "need root to install packages (run as root or install: ${missing[*]})"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# configure_and_build <dir> <extra cmake args...>
configure_and_build() {
  local dir="$1"; shift
  export CCACHE_BASEDIR="$ROOT"        # cache hits across clones in other folders
  export CCACHE_NOHASHDIR=1
  cmake -S "$ROOT" -B "$dir" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
        -DCMAKE_C_COMPILER_LAUNCHER=ccache -DARI_MODELS_DIR="$MODELS_DIR" "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS"
}

build_release() { configure_and_build "$ROOT/build-release" -DCMAKE_BUILD_TYPE=Release; }

run_tests() {
  local dir="$1"; shift
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" "$@")
}

cmd_test() {
  setup
  [[ -d "$MODELS_DIR" ]] || log "note: $MODELS_DIR absent: tests that need real models will skip"
  log "Release build"
  build_release
  log "Release tests"
  run_tests "$ROOT/build-release"
  log "ASan+UBSan build"
  configure_and_build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARI_SANITIZE=ON \
      -DARI_BUILD_BENCHMARKS=OFF
  log "ASan+UBSan tests (label 'slow' excluded)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      run_tests "$ROOT/build-asan" -LE slow
  log "all tests passed"
}

cmd_demo() {
  setup
  build_release
  "$ROOT/scripts/demo.sh" "$ROOT/build-release"
}

case "${1:-}" in
  setup) setup ;;
  build) setup; build_release ;;
  test) cmd_test ;;
  demo) cmd_demo ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
