#!/usr/bin/env python3
"""Static figures of a compiled kernel: per function and per loop, the instruction count,
the SIMD register stack accesses (spills and reloads of q/d registers) and the count of
one instruction of interest. For kernels that cannot be timed on this machine (the aarch64
ones run only under qemu), these are the figures that can be measured.

  scripts/loop_stats.py OBJECT [--objdump aarch64-linux-gnu-objdump] [--op sdot]

A loop is a backward branch inside a function; nested loops are listed separately (an
outer loop's figures include its inner loops'). Only loops that hold at least one --op
instruction are listed.
"""
import argparse
import re
import subprocess
import sys

FUNC = re.compile(r"^([0-9a-f]+) <(.*)>:$")
INSN = re.compile(r"^\s+([0-9a-f]+):\t(\S+)\s*(.*)$")
TARGET = re.compile(r"(?:^|[\s,])([0-9a-f]+) <")
SIMD_STACK = re.compile(r"\b[qd]\d+\b.*\[sp")


def functions(dump):
    name, body = None, []
    for line in dump.splitlines():
        m = FUNC.match(line)
        if m:
            if name is not None:
                yield name, body
            name, body = m.group(2), []
            continue
        m = INSN.match(line)
        if m and name is not None:
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name is not None:
        yield name, body


def stats(body, op):
    spills = sum(1 for _, _, args in body if SIMD_STACK.search(args))
    ops = sum(1 for _, mnemonic, _ in body if mnemonic == op)
    return len(body), spills, ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("object")
    parser.add_argument("--objdump", default="aarch64-linux-gnu-objdump")
    parser.add_argument("--op", default="sdot")
    args = parser.parse_args()
    try:
        dump = subprocess.run([args.objdump, "-d", "--no-show-raw-insn", "-C", args.object],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"loop_stats: cannot disassemble {args.object}: {e}", file=sys.stderr)
        return 1
    for name, body in functions(dump):
        if not body:
            continue
        n, spills, ops = stats(body, args.op)
        print(f"{name[:100]}\n  function: {n} instructions, {spills} SIMD stack accesses, "
              f"{ops} {args.op}")
        index = {addr: i for i, (addr, _, _) in enumerate(body)}
        for i, (addr, mnemonic, operands) in enumerate(body):
            m = TARGET.search(operands)
            if not (mnemonic.startswith(("b", "cb", "tb")) and m):
                continue
            target = int(m.group(1), 16)
            if target >= addr or target not in index:
                continue
            n, spills, ops = stats(body[index[target]:i + 1], args.op)
            if ops:
                print(f"  loop {target:#x}-{addr:#x}: {n} instructions, {spills} SIMD stack "
                      f"accesses, {ops} {args.op}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output cut short by a pipe (| head)
        sys.exit(0)
