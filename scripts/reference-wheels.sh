#!/usr/bin/env bash
# Pack the reference stack (docker/requirements/reference.lock, docs/reference-stack.md) for a GPU machine without
# a package index: agent-lightning 0.3 over verl 0.6.1, vLLM 0.11.0 and torch 2.8.0 with its CUDA 12 libraries.
#
#   scripts/reference-wheels.sh OUT_DIR [WHEEL_DIR]
#
# Downloads every pin's CPython 3.12 manylinux x86_64 wheel with --require-hashes into WHEEL_DIR (default
# OUT_DIR/wheels; files already there are reused after the same hash check), downloads the two pins PyPI ships only
# as source distributions (hash-checked) and builds them into wheels (both pure Python), and writes one tar of
# `wheels/`, `sdist-wheels/` and `locks/` split into OUT_DIR/part_00, part_01, ... of at most PART_MIB MiB (default
# 57) with OUT_DIR/SHA256SUMS. Nothing is left to the machine: its own torch is not the one vLLM 0.11.0 needs.
# On the GPU machine: scripts/reference-install.sh PARTS_DIR PREFIX.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR [WHEEL_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
out=$1
wheels=${2:-$out/wheels}
here=$(cd "$(dirname "$0")/.." && pwd)
lock=${REFERENCE_LOCK:-$here/docker/requirements/reference.lock}
part_mib=${PART_MIB:-57}
python=${PYTHON:-python3}
sdists=(antlr4-python3-runtime gpustat)  # pure Python, source distributions only on PyPI
[ -f "$lock" ] || { echo "missing $lock" >&2; exit 2; }
mkdir -p "$out" "$wheels"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pack/locks" "$stage/pack/wheels" "$stage/pack/sdist-wheels" "$stage/sdists"

# The lock's entries (with their hashes): lock.carried to download as wheels, lock.sdist the sdist-only ones.
"$python" "$here/scripts/wheels.py" split "$lock" "$stage/lock" --sdist "${sdists[@]}"

platform_args=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1 linux; do
  platform_args+=(--platform "${p}_x86_64")
done
platform_args+=(--platform any)
n=$(grep -c '==' "$stage/lock.carried")
echo "downloading $n wheels (about 4.9 GiB) into $wheels" >&2
"$python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes "${platform_args[@]}" \
  -d "$wheels" -r "$stage/lock.carried"
"$python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes --no-binary :all: \
  -d "$stage/sdists" -r "$stage/lock.sdist"
"$python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$stage/pack/sdist-wheels" "$stage"/sdists/*

# Only the lock's wheels go into the tar (the download folder may hold other versions from earlier runs).
"$python" "$here/scripts/wheels.py" pick "$stage/lock.carried" "$wheels" "$stage/pack/wheels"
cp "$lock" "$stage/pack/locks/reference.lock"
cp "$stage/lock.carried" "$stage/pack/locks/reference.lock.carried"
(cd "$stage/pack/sdist-wheels" && sha256sum -- *.whl) > "$stage/pack/locks/sdist-wheels.sha256"

rm -f "$out"/part_* "$out/SHA256SUMS"
tar cf - -C "$stage/pack" wheels sdist-wheels locks | split -b "${part_mib}m" -d -a 3 - "$out/part_"
(cd "$out" && sha256sum part_* > SHA256SUMS)
size=$(du -cm "$out"/part_* | tail -1 | cut -f1)
echo "$(ls "$stage/pack/wheels" | wc -l) wheels + $(ls "$stage/pack/sdist-wheels" | wc -l) built from sdists (reference.lock sha256 $(sha256sum "$lock" | cut -c1-12)), ${size} MiB in $(ls "$out"/part_* | wc -l) parts of at most ${part_mib} MiB: $out"
