# Cross build for aarch64 head units with Debian's g++-aarch64-linux-gnu.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=config/toolchain-aarch64.cmake -DARI_RUNTIME_ONLY=ON
# Libraries come from Debian's arm64 multiarch packages (dpkg --add-architecture arm64;
# apt-get install libicu-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64).
# Binaries run here under qemu-user through scripts/qemu-aarch64.sh, which picks the CPU
# model from ARI_QEMU_CPU (cortex-a53 | cortex-a76 | max) and the right loader prefix:
#   ARI_QEMU_CPU=cortex-a76 ctest --test-dir build-aarch64
# `./ari.sh test` does all of this (cross_test); docs/deployment.md explains it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
get_filename_component(_ari_source_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR ${_ari_source_root}/scripts/qemu-aarch64.sh)
