#!/usr/bin/env bash
# Pack the GPU image's hash-locked package set for a GPU machine without a package index.
#
#   scripts/gpu-wheels.sh OUT_DIR [WHEEL_DIR]
#
# The set is the GPU image's: docker/requirements/gpu.lock (the set that trained on the H200), gpu-calculator.lock
# (the calculator's mcp<2 overlay) and gpu-convert.lock (TRL, for the model conversion only). Downloads their
# CPython 3.12 manylinux x86_64 wheels with --require-hashes into WHEEL_DIR (default OUT_DIR/wheels; files already
# there are reused after the same hash check), builds a wheel from each pin that PyPI ships only as an sdist (the
# sdist itself is hash-checked), and writes one tar of `wheels/`, `calculator-wheels/`, `convert-wheels/`,
# `sdist-wheels/` and `locks/`, split into OUT_DIR/part_00, part_01, ... of at most PART_MIB MiB (default 57) each,
# with OUT_DIR/SHA256SUMS. Copy the parts and SHA256SUMS to the GPU machine, then
# `scripts/gpu-install.sh PARTS_DIR PREFIX` there: it installs with --require-hashes from the same locks.
#
# The GPU machine's own torch stack is not carried by default (several GB): the pins of gpu.lock matching
# MACHINE_HAS (a regex, default: torch, triton, cuda-toolkit and torch's nvidia-* CUDA 13 libraries; never a pin of
# the H200 set) are left out of the carried lock, and gpu-install.sh checks that the machine's torch is the lock's version.
# MACHINE_HAS='^$' carries everything.
#
# BFCL=1 adds BFCL's checker environment (benchmarks/bfcl): the pins of BFCL_PINS (default locks/bfcl.txt) and
# BFCL_DATA (default the bfcl-eval release the spec's data comes from), as CPython 3.12 wheels in `bfcl-wheels/`,
# their sha256 written at download in locks/bfcl-wheels.sha256 (locks/bfcl.txt has no hashes) and checked at install.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR [WHEEL_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
out=$1
wheels=${2:-$out/wheels}
here=$(cd "$(dirname "$0")/.." && pwd)
req=${GPU_LOCK_DIR:-$here/docker/requirements}  # GPU_LOCK_DIR: another folder with the same four files (tests)
lock=$req/gpu.lock
calc_lock=$req/gpu-calculator.lock
convert_lock=$req/gpu-convert.lock
h200=$req/gpu-h200.txt
part_mib=${PART_MIB:-57}
python=${PYTHON:-python3}
machine_has=${MACHINE_HAS:-^(torch|triton|cuda-toolkit|nvidia-(cublas|cuda-cupti|cuda-nvrtc|cuda-runtime|cudnn-cu13|cufft|cufile|curand|cusolver|cusparse|cusparselt-cu13|nccl-cu13|nvjitlink|nvshmem-cu13|nvtx))$}
# Pins that PyPI has only as source distributions: built into wheels here (pure Python, so any platform).
sdists=(antlr4-python3-runtime)

for f in "$lock" "$calc_lock" "$convert_lock" "$h200"; do [ -f "$f" ] || { echo "missing $f" >&2; exit 2; }; done
mkdir -p "$out" "$wheels"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# split_lock LOCK OUT_PREFIX: OUT_PREFIX.carried (hash-locked entries to carry as wheels), OUT_PREFIX.sdist (the
# sdist-only entries), OUT_PREFIX.machine (names left to the machine). Entries keep their hashes.
split_lock() {
  "$python" "$here/scripts/wheels.py" split "$1" "$2" --machine "$machine_has" --keep "$h200" --sdist "${sdists[@]}"
}

platform_args=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
  manylinux_2_17 manylinux2014 manylinux1 linux; do
  platform_args+=(--platform "${p}_x86_64")
done
platform_args+=(--platform any)

# download LOCK DEST LOCK_NAME: the lock's wheels (hash-checked) into DEST, and the carried lock into the pack.
download() {
  local src=$1 dest=$2 name=$3
  split_lock "$src" "$stage/$name"
  mkdir -p "$dest"
  "$python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes "${platform_args[@]}" \
    -d "$dest" -r "$stage/$name.carried"
  if [ -s "$stage/$name.sdist" ]; then
    mkdir -p "$stage/sdists" "$stage/pack/sdist-wheels"
    "$python" -m pip download -q --disable-pip-version-check --no-deps --require-hashes --no-binary :all: \
      -d "$stage/sdists" -r "$stage/$name.sdist"
    "$python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$stage/pack/sdist-wheels" "$stage"/sdists/*
  fi
  cp "$stage/$name.carried" "$stage/pack/locks/$name.carried"
  cp "$stage/$name.machine" "$stage/pack/locks/$name.machine"
  cp "$src" "$stage/pack/locks/$name"
}

mkdir -p "$stage/pack/locks"
download "$lock" "$wheels" gpu.lock
download "$calc_lock" "$wheels/calculator" gpu-calculator.lock
download "$convert_lock" "$wheels/convert" gpu-convert.lock

# Only the wheels of the carried locks go into the tar (the download folder may hold other versions from earlier
# runs); pip picks among them by hash at install time.
pick() {  # pick CARRIED_LOCK SRC DEST
  "$python" "$here/scripts/wheels.py" pick "$@"
}
pick "$stage/gpu.lock.carried" "$wheels" "$stage/pack/wheels"
pick "$stage/gpu-calculator.lock.carried" "$wheels/calculator" "$stage/pack/calculator-wheels"
pick "$stage/gpu-convert.lock.carried" "$wheels/convert" "$stage/pack/convert-wheels"
mkdir -p "$stage/pack/sdist-wheels"

sets=(wheels calculator-wheels convert-wheels sdist-wheels locks)
if [ "${BFCL:-0}" = 1 ]; then
  bfcl_pins=${BFCL_PINS:-$here/locks/bfcl.txt}
  bfcl_data=${BFCL_DATA:-bfcl-eval==2026.3.23}
  { grep -E '^[A-Za-z0-9][^ ]*==' "$bfcl_pins"; echo "$bfcl_data"; } | sort -u > "$stage/bfcl.pins"
  mkdir -p "$wheels/bfcl" "$stage/pack/bfcl-wheels"
  "$python" -m pip download -q --disable-pip-version-check --no-deps "${platform_args[@]}" -d "$wheels/bfcl" \
    -r "$stage/bfcl.pins"
  pick "$stage/bfcl.pins" "$wheels/bfcl" "$stage/pack/bfcl-wheels"
  (cd "$stage/pack/bfcl-wheels" && sha256sum -- *.whl) > "$stage/pack/locks/bfcl-wheels.sha256"
  echo "${bfcl_data%%==*}" > "$stage/pack/locks/bfcl-data"
  sets+=(bfcl-wheels)
fi

rm -f "$out"/part_*
tar cf - -C "$stage/pack" "${sets[@]}" \
  | split -b "${part_mib}m" -d -a 2 - "$out/part_"
(cd "$out" && sha256sum part_* > SHA256SUMS)
n=$(ls "$stage/pack/wheels" | wc -l)
c=$(ls "$stage/pack/calculator-wheels" | wc -l)
v=$(ls "$stage/pack/convert-wheels" | wc -l)
m=$(wc -l < "$stage/gpu.lock.machine")
size=$(du -cm "$out"/part_* | tail -1 | cut -f1)
b=0  # no BFCL folder without BFCL=1 (an `ls` of it would end the script under pipefail, with no message)
[ -d "$stage/pack/bfcl-wheels" ] && b=$(ls "$stage/pack/bfcl-wheels" | wc -l)
echo "$n wheels + $c calculator + $v conversion + $b BFCL checker wheels (gpu.lock sha256 $(sha256sum "$lock" | cut -c1-12); $m pins left to the machine's torch), ${size} MiB in $(ls "$out"/part_* | wc -l) parts of at most ${part_mib} MiB: $out"
