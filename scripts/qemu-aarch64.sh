#!/usr/bin/env bash
# Runs an aarch64 program under qemu-user with the CPU model named by ARI_QEMU_CPU
# (default: max). config/toolchain-aarch64.cmake uses it as CMAKE_CROSSCOMPILING_EMULATOR,
# so ctest runs every test through it:
#   ARI_QEMU_CPU=cortex-a53 ctest --test-dir build-aarch64     # armv8-a       -> tier neon
#   ARI_QEMU_CPU=cortex-a76 ctest --test-dir build-aarch64     # + dotprod     -> neon_dotprod
#   ARI_QEMU_CPU=max        ctest --test-dir build-aarch64     # + i8mm (+SVE) -> neon_i8mm
#
# Loader and libc: with Debian's arm64 multiarch libc6 present (it comes with
# libicu-dev:arm64 etc.), the program must run with that ld.so AND that libc.so.6. The
# cross toolchain's own copy under /usr/aarch64-linux-gnu is a different glibc build;
# `qemu-aarch64 -L /usr/aarch64-linux-gnu` picks its ld.so but the multiarch libc.so.6,
# and the mix hangs in the first pthread_create. So: prefix / when multiarch libc exists.
set -euo pipefail
cpu="${ARI_QEMU_CPU:-max}"
qemu="$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)"
if [[ -z "$qemu" ]]; then
  echo "qemu-aarch64.sh: qemu-aarch64 not found (Debian: apt-get install qemu-user)" >&2
  exit 127
fi
if [[ -e /lib/ld-linux-aarch64.so.1 ]]; then
  prefix=/
else
  prefix=/usr/aarch64-linux-gnu
fi
exec "$qemu" -L "$prefix" -cpu "$cpu" "$@"
