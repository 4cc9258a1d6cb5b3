#!/usr/bin/env bash
# ARI: one entry point for a fresh Debian 12 machine (run as root).
#   ./ari.sh demo    install packages, build (Release), run the demo
#                    (--nodes 2: also a second node; CRITICAL is routed to the idle one)
#   ./ari.sh test    install packages, build Release + ASan/UBSan, run the whole suite in both
#   ./ari.sh setup   only install the Debian packages (idempotent; seconds when present)
#   ./ari.sh build   only the Release build
#   ./ari.sh lint    clang-format + clang-tidy on the project's sources (needs the Release build)
#   ./ari.sh cross-test  aarch64 cross build of runtime/ + its tests under qemu (3 CPU models)
#   ./ari.sh cross-all   aarch64 cross build of every module (arm64 multiarch), not run
#   ./ari.sh fuzz-smoke             build the libFuzzer targets (clang), run each 30 s
#   ./ari.sh fuzz TARGET SECONDS    one long local fuzz run (e.g. fuzz gguf_fuzz 600)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JOBS="${ARI_JOBS:-2}"
MODELS_DIR="${ARI_MODELS_DIR:-$ROOT/../shared/models}"
export ARI_MODELS_DIR="$MODELS_DIR"

# Every Debian package the project uses, and why.
PACKAGES=(
  cmake g++ make ccache pkg-config        # toolchain; ccache keeps rebuilds cheap
  cyclonedds-dev cyclonedds-tools         # DDS (C API) and idlc
  libddsc0debian openssl                  # DDS Security: Cyclone's auth/access/crypto plugins, and
                                          # the CA, certificates and signed documents the security
                                          # tests make (scripts/security/gen.sh); those tests fail,
                                          # not skip, without them (tests/component/security_util.h)
  iceoryx libiceoryx-posh-dev             # shared memory transport (iox-roudi)
  libprotobuf-dev protobuf-compiler       # policy, config, drive logs
  libsensors-dev                          # temperature via lm-sensors
  libgtest-dev libgmock-dev               # tests
  libbenchmark-dev                        # micro-benchmarks
  libicu-dev                              # Unicode categories/regex for tokenizer pre-splitting
  libzstd-dev                             # parked sessions on disk, compressed (runtime/engine)
  nlohmann-json3-dev                      # JSON Schema parsing (runtime/grammar), test validator
  clang-16 libclang-rt-16-dev             # libFuzzer + ASan/UBSan runtimes for tests/fuzz (clang 14
                                          # cannot compile libstdc++ 12's <expected>)
  clang-tidy-16 clang-format-16           # lint: .clang-tidy, .clang-format (scripts/lint.sh)
  chromium                                # headless render test of the replay report (sim.report)
  fastddsgen libfastrtps-dev libfastcdr-dev  # cross-vendor interop test (tests/interop): Fast DDS
  openjdk-17-jre-headless                 # fastddsgen is a Java program (Debian 12 JRE)
)

log() {  # with the time since the command started: where CI's minutes go
  printf '\033[1m[ari %dm%02ds]\033[0m %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2
}

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
  log "lint (clang-format, clang-tidy)"
  "$ROOT/scripts/lint.sh" "$ROOT/build-release" all
  log "ASan+UBSan build"
  configure_and_build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DARI_SANITIZE=ON \
      -DARI_BUILD_BENCHMARKS=OFF
  log "ASan+UBSan tests (label 'slow' excluded)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      run_tests "$ROOT/build-asan" -LE slow
  # aarch64: cross build of runtime/ + its tests under qemu for 3 CPU models (issue 10;
  # docs/deployment.md). ARI_CROSS_TEST=0 skips it (e.g. on a machine without arm64
  # multiarch packages).
  if [[ "${ARI_CROSS_TEST:-1}" == 1 ]]; then cross_test; else log "aarch64 tests skipped (ARI_CROSS_TEST=0)"; fi
  log "fuzz smoke (30 s per target)"
  cmd_fuzz_smoke
  log "all tests passed"
}

# --- Fuzzing (tests/fuzz, docs/reliability.md) ---------------------------------------
FUZZ_DIR="$ROOT/build-fuzz"
# Targets: every tests/fuzz/<name>_fuzz.cc; its seeds are in tests/fuzz/corpus/<name>/.
fuzz_targets() {
  local f
  for f in "$ROOT"/tests/fuzz/*_fuzz.cc; do basename "$f" .cc; done
}

build_fuzz() {
  log "fuzz build (clang-16, libFuzzer + ASan + UBSan) in $FUZZ_DIR"
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  cmake -S "$ROOT" -B "$FUZZ_DIR" -DARI_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
        -DARI_MODELS_DIR="$MODELS_DIR" >/dev/null
  cmake --build "$FUZZ_DIR" -j"$JOBS" --target ari_fuzz
}

# run_fuzzer <target> <seconds> [extra libFuzzer args...]: fuzzes a copy of the seed corpus
# (the repo is never written); any crash, leak, UB, timeout or OOM fails with the
# reproducer in $FUZZ_DIR/fuzz-out/<target>/ (replay it: <binary> <reproducer>).
run_fuzzer() {
  local target="$1" seconds="$2"; shift 2
  local name="${target%_fuzz}"
  local work="$FUZZ_DIR/fuzz-out/$target"
  rm -rf "$work" && mkdir -p "$work/corpus"
  cp -r "$ROOT/tests/fuzz/corpus/$name/." "$work/corpus/" 2>/dev/null || true
  # Seeds generated by the build (the GGUF seeds: tests/fuzz/CMakeLists.txt).
  cp -r "$FUZZ_DIR/tests/fuzz/corpus/$name/." "$work/corpus/" 2>/dev/null || true
  log "fuzz $target for ${seconds}s (corpus copy in $work/corpus)"
  local sym
  sym="$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer || true)"
  [[ -n "$sym" ]] && export ASAN_SYMBOLIZER_PATH="$sym"   # readable stack traces
  if ! (cd "$work" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$FUZZ_DIR/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" "$@" corpus \
        >"$work/log.txt" 2>&1); then
    tail -n 40 "$work/log.txt" >&2
    log "FUZZ FINDING in $target: see $work/log.txt and $work/{crash,leak,timeout,oom}-*"
    return 1
  fi
  grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units' "$work/log.txt" | tail -n 2 >&2 || true
}

cmd_fuzz_smoke() {
  build_fuzz
  local t failed=0
  for t in $(fuzz_targets); do
    run_fuzzer "$t" 30 || failed=1
  done
  ((failed == 0)) || { log "fuzz smoke: findings (see above)"; exit 1; }
  log "fuzz smoke: no findings"
}

cmd_fuzz() {
  local target="${1:-}" seconds="${2:-600}"
  if [[ -z "$target" || ! -f "$ROOT/tests/fuzz/$target.cc" ]]; then
    log "usage: ./ari.sh fuzz TARGET SECONDS; targets: $(fuzz_targets | tr '\n' ' ')"
    exit 2
  fi
  build_fuzz
  run_fuzzer "$target" "$seconds"
}

# --- aarch64: cross build + emulated tests (docs/deployment.md) -----------------------
CROSS_DIR="$ROOT/build-aarch64"
CROSS_HOST_PACKAGES=(g++-aarch64-linux-gnu qemu-user)   # cross compiler; qemu-aarch64
CROSS_ARM64_PACKAGES=(libicu-dev:arm64 libzstd-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)  # runtime deps
# qemu CPU models -> ISA tier the kernels must pick: armv8-a (neon), +dotprod, +i8mm.
QEMU_CPUS=(cortex-a53 cortex-a76 max)

# not_installed <pkg...>: prints the packages (arch-qualified names allowed) not installed.
not_installed() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# cross_setup <arm64 packages...>: idempotent; adds the arm64 architecture only if absent and
# runs apt-get update only when something is missing.
cross_setup() {
  local add_arch=0 missing
  dpkg --print-foreign-architectures | grep -qx arm64 || add_arch=1
  mapfile -t missing < <(not_installed "${CROSS_HOST_PACKAGES[@]}" "$@")
  if ((add_arch == 0 && ${#missing[@]} == 0)); then
    log "cross packages: all present"
    return
  fi
  if [[ $(id -u) -ne 0 ]]; then
    log "need root: dpkg --add-architecture arm64; apt-get install ${missing[*]}"
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ((add_arch)); then
    log "dpkg --add-architecture arm64"
    dpkg --add-architecture arm64
  fi
  log "installing: ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Cross-builds runtime/ and its tests (ccache), then runs them under qemu-user once per CPU
# model through scripts/qemu-aarch64.sh (the toolchain's emulator; ARI_QEMU_CPU picks the
# model). Label 'no_emulation' marks what qemu-user cannot emulate (page residency via
# mincore/madvise, exec of aarch64 children), 'slow' is skipped as in the ASan run.
cross_test() {
  local start=$SECONDS cpu tier
  cross_setup "${CROSS_ARM64_PACKAGES[@]}"
  log "aarch64 cross build (runtime + tests) in $CROSS_DIR"
  configure_and_build "$CROSS_DIR" -DCMAKE_TOOLCHAIN_FILE="$ROOT/config/toolchain-aarch64.cmake" \
      -DARI_RUNTIME_ONLY=ON -DARI_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Release
  local built=$SECONDS
  for cpu in "${QEMU_CPUS[@]}"; do
    tier=$(ARI_QEMU_CPU=$cpu "$ROOT/scripts/qemu-aarch64.sh" \
           "$CROSS_DIR/tests/runtime/runtime_kernels_dispatch_test" \
           --gtest_filter=DispatchTest.DetectsConsistentFeatures 2>&1 | grep -m1 '^CPU:' || true)
    log "qemu -cpu $cpu: ${tier:-tier line missing}"
    ARI_QEMU_CPU=$cpu run_tests "$CROSS_DIR" -LE 'slow|no_emulation' --timeout 600
  done
  log "aarch64: build $((built - start)) s, emulated tests $((SECONDS - built)) s"
}

# Every module for aarch64: arm64 multiarch DDS / protobuf / sensors / iceoryx; idlc and
# protoc are the host's (cyclonedds-tools, protobuf-compiler from PACKAGES). Build only:
# not part of `test` (it costs a full second build of the tree).
CROSS_ALL_ARM64_PACKAGES=("${CROSS_ARM64_PACKAGES[@]}" cyclonedds-dev:arm64 libprotobuf-dev:arm64
                          libsensors-dev:arm64 libiceoryx-posh-dev:arm64)
cross_all() {
  local start=$SECONDS
  cross_setup "${CROSS_ALL_ARM64_PACKAGES[@]}"
  log "aarch64 cross build of every module in $ROOT/build-aarch64-all"
  configure_and_build "$ROOT/build-aarch64-all" \
      -DCMAKE_TOOLCHAIN_FILE="$ROOT/config/toolchain-aarch64.cmake" \
      -DARI_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Release
  log "aarch64 full build done in $((SECONDS - start)) s: $ROOT/build-aarch64-all/{component,sim,qos,runtime}/ari-*"
}

cmd_demo() {
  setup
  build_release
  "$ROOT/scripts/demo.sh" "$ROOT/build-release" "$@"
}

case "${1:-}" in
  setup) setup ;;
  build) setup; build_release ;;
  lint) setup; build_release; "$ROOT/scripts/lint.sh" "$ROOT/build-release" all ;;
  test) cmd_test ;;
  demo) shift; cmd_demo "$@" ;;
  cross-test) setup; cross_test ;;
  cross-all) setup; cross_all ;;
  fuzz-smoke) setup; cmd_fuzz_smoke ;;
  fuzz) setup; shift; cmd_fuzz "$@" ;;
  *) sed -n '2,11p' "$0"; exit 2 ;;
esac
