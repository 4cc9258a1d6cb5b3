#!/usr/bin/env bash
# Static checks of the project's own sources (docs/building.md "Lint"); part of
# `./ari.sh test`, alone as `./ari.sh lint`.
#   scripts/lint.sh BUILD_DIR [format|tidy|all] [FILE...]
#  - format: clang-format-16 --dry-run -Werror (the root .clang-format) on every tracked
#    .h/.cc file, and no relative includes ("../x.h" would step around the layering that
#    the include views enforce, docs/architecture.md).
#  - tidy: clang-tidy-16 (the root .clang-tidy; tests/.clang-tidy for tests) on every
#    tracked .cc file in BUILD_DIR/compile_commands.json (the x86 build: arm/ kernels and
#    fuzz targets are compiled by their own builds), headers through HeaderFilterRegex.
#    clang 16 spells the standard c++2b, and libstdc++ 12 shows <expected> to clang only
#    with __cpp_concepts >= 202002L (as in the fuzz build, CMakeLists.txt; -U first: a
#    redefinition warning would be an error here).
#    A file whose preprocessed text, flags and checks are those of an earlier clean run is
#    not checked again (scripts/lint_cache.py; stamps in $ARI_LINT_CACHE, default
#    ~/.cache/ari-lint; delete it to check everything).
# Exit 0 when clean; the findings otherwise (full clang-tidy log in BUILD_DIR/lint/).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:?usage: scripts/lint.sh BUILD_DIR [format|tidy|all] [FILE...]}" && pwd)"
WHAT="${2:-all}"
shift $(( $# >= 2 ? 2 : 1 ))
JOBS="${ARI_JOBS:-2}"
CACHE="${ARI_LINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ari-lint}"  # lint_cache.py
cd "$ROOT"

log() { printf '\033[1m[lint]\033[0m %s\n' "$*" >&2; }

sources() {  # tracked C++ files, or the ones given
  if (($# > 0)); then printf '%s\n' "$@"; else git ls-files '*.cc' '*.h'; fi
}

check_format() {
  local bad=0 f
  while read -r f; do
    if ! clang-format-16 --dry-run -Werror "$f" 2>/dev/null; then
      log "not formatted: $f (clang-format-16 -i $f)"
      bad=1
    fi
  done < <(sources "$@")
  if grep -nE '^#include "\.\.?/' $(sources "$@") /dev/null; then
    log "relative includes (above): include from the project root"
    bad=1
  fi
  ((bad == 0)) && log "clang-format: clean"
  return $bad
}

check_tidy() {
  [[ -f "$BUILD/compile_commands.json" ]] || { log "no $BUILD/compile_commands.json"; return 1; }
  mkdir -p "$BUILD/lint"
  local files=() keys="$BUILD/lint/tidy-keys.tsv" list="$BUILD/lint/tidy-files.txt"
  if ! python3 "$ROOT/scripts/lint_cache.py" pending "$BUILD/compile_commands.json" "$ROOT" \
      "$CACHE" "$keys" "$JOBS" "$@" > "$list"; then
    log "clang-tidy: cannot preprocess the sources (scripts/lint_cache.py failed)"
    return 1
  fi
  mapfile -t files < "$list"
  if ((${#files[@]} == 0)); then
    log "clang-tidy: clean (every file's text and checks unchanged since a clean run; cache $CACHE)"
    return 0
  fi
  log "clang-tidy-16 on ${#files[@]} files (-j$JOBS; any others unchanged since a clean run)"
  local rc=0
  run-clang-tidy-16 -p "$BUILD" -j "$JOBS" -quiet -extra-arg=-std=c++2b \
      -extra-arg=-U__cpp_concepts -extra-arg=-D__cpp_concepts=202002L "${files[@]}" \
      > "$BUILD/lint/clang-tidy.log" 2>&1 || rc=$?
  if grep -E '(warning|error): ' "$BUILD/lint/clang-tidy.log" | sort -u | grep .; then
    log "clang-tidy: findings above (log: $BUILD/lint/clang-tidy.log)"
    return 1
  fi
  if ((rc != 0)); then
    tail -n 20 "$BUILD/lint/clang-tidy.log" >&2
    log "clang-tidy failed (exit $rc; log: $BUILD/lint/clang-tidy.log)"
    return 1
  fi
  python3 "$ROOT/scripts/lint_cache.py" commit "$CACHE" "$keys"
  log "clang-tidy: clean"
}

status=0
case "$WHAT" in
  format) check_format "$@" || status=1 ;;
  tidy) check_tidy "$@" || status=1 ;;
  all) check_format "$@" || status=1; check_tidy "$@" || status=1 ;;
  *) log "unknown check '$WHAT' (format, tidy, all)"; exit 2 ;;
esac
exit $status
