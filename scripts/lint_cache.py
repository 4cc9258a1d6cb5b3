#!/usr/bin/env python3
"""Which files clang-tidy must check again (scripts/lint.sh; docs/building.md "Lint").

  lint_cache.py pending DB ROOT CACHE_DIR KEYS_OUT JOBS [FILE...]
      prints the tracked .cc files of compile database DB (or the FILEs given) that have
      no stamp in CACHE_DIR, and writes "file<TAB>key" for them to KEYS_OUT;
  lint_cache.py commit CACHE_DIR KEYS_OUT
      stamps every key of KEYS_OUT (lint.sh calls it only after a clean run).

A file's key is the SHA-256 of: `clang-tidy-16 --version`, both .clang-tidy files, the
file's compile flags, and its preprocessed text (clang++-16 -E -C with DB's flags and
lint.sh's extra arguments: every header it includes counts, comments (NOLINT) and line
markers (function sizes count lines) included), with the checkout's and the build's paths
replaced by placeholders so that clones in other folders share stamps. A stamp means
"clang-tidy found nothing in this exact text with these exact checks"; any change to
either makes a new key.
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def preprocess_args(entry):
    args = shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    # clang's view, as clang-tidy has it (lint.sh's extra arguments): an #ifdef __clang__
    # branch counts as clang-tidy sees it.
    return (["clang++-16"] + out[1:] +
            ["-std=c++2b", "-U__cpp_concepts", "-D__cpp_concepts=202002L", "-E", "-C"])


def key_of(entry, root, build, base):
    args = preprocess_args(entry)
    text = subprocess.run(args, cwd=entry["directory"], capture_output=True, check=True).stdout
    h = hashlib.sha256(base)
    for part in (" ".join(args).encode(), text):
        h.update(part.replace(build.encode(), b"@BUILD@").replace(root.encode(), b"@ROOT@"))
    return h.hexdigest()


def pending(db_path, root, cache, keys_out, jobs, want):
    db = os.path.dirname(os.path.abspath(db_path))
    tracked = set(
        subprocess.check_output(["git", "-C", root, "ls-files", "*.cc"], text=True).split())
    entries = []
    for e in json.load(open(db_path)):
        rel = os.path.relpath(e["file"], root)
        if rel in tracked and (not want or rel in want):
            entries.append(e)
    base = subprocess.check_output(["clang-tidy-16", "--version"])
    for cfg in (".clang-tidy", "tests/.clang-tidy"):
        with open(os.path.join(root, cfg), "rb") as f:
            base += f.read()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        keys = list(pool.map(lambda e: key_of(e, root, db, base), entries))
    with open(keys_out, "w") as out:
        for e, k in zip(entries, keys):
            if not os.path.exists(os.path.join(cache, k[:2], k)):
                out.write(f"{e['file']}\t{k}\n")
                print(e["file"])


def commit(cache, keys_out):
    with open(keys_out) as f:
        for line in f:
            k = line.rstrip("\n").split("\t")[1]
            os.makedirs(os.path.join(cache, k[:2]), exist_ok=True)
            open(os.path.join(cache, k[:2], k), "w").close()


def main():
    if len(sys.argv) >= 7 and sys.argv[1] == "pending":
        pending(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]),
                set(sys.argv[7:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "commit":
        commit(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
