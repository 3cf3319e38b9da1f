#!/usr/bin/env bash
# Pack the GPU machine's package set for a machine without a package index.
#
#   scripts/gpu-wheels.sh OUT_DIR [WHEEL_DIR]
#
# Downloads the exact pins of docker/requirements/gpu-h200.txt (and the calculator's own set,
# gpu-h200-calculator.txt, and the model converter's, gpu-h200-convert.txt) as CPython 3.12 manylinux x86_64
# wheels into WHEEL_DIR (default OUT_DIR/wheels; files already there are reused), builds a wheel from each pin
# that PyPI ships only as an sdist, and writes one tar of `wheels/`, `calculator-wheels/` and `convert-wheels/`,
# split into OUT_DIR/part_00, part_01, ... of at most PART_MIB MiB (default 57) each, with OUT_DIR/SHA256SUMS.
# Copy the parts and SHA256SUMS to the GPU machine, then `scripts/gpu-install.sh PARTS_DIR PREFIX` there.
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR [WHEEL_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
out=$1
wheels=${2:-$out/wheels}
here=$(cd "$(dirname "$0")/.." && pwd)
pins=$here/docker/requirements/gpu-h200.txt
calc_pins=$here/docker/requirements/gpu-h200-calculator.txt
convert_pins=$here/docker/requirements/gpu-h200-convert.txt
part_mib=${PART_MIB:-57}
python=${PYTHON:-python3}
# Pins that PyPI has only as source distributions: built into wheels here (pure Python, so any platform).
sdists=(antlr4-python3-runtime)

for f in "$pins" "$calc_pins" "$convert_pins"; do [ -f "$f" ] || { echo "missing $f" >&2; exit 2; }; done
mkdir -p "$out" "$wheels"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

platform_args=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for p in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
  manylinux_2_17 manylinux2014 manylinux1 linux; do
  platform_args+=(--platform "${p}_x86_64")
done
platform_args+=(--platform any)

download() {  # download REQUIREMENTS DEST
  local reqs=$1 dest=$2 binary=$stage/binary.txt
  grep -vE '^\s*(#|$)' "$reqs" > "$stage/all.txt"
  cp "$stage/all.txt" "$binary"
  for name in "${sdists[@]}"; do
    grep -viE "^${name}==" "$binary" > "$binary.tmp" || true
    mv "$binary.tmp" "$binary"
  done
  "$python" -m pip download -q --disable-pip-version-check --no-deps "${platform_args[@]}" -d "$dest" -r "$binary"
  for name in "${sdists[@]}"; do
    local pin
    pin=$(grep -iE "^${name}==" "$stage/all.txt" || true)
    [ -n "$pin" ] || continue
    "$python" -m pip wheel -q --disable-pip-version-check --no-deps --no-binary "$name" -w "$dest" "$pin"
  done
}

download "$pins" "$wheels"
mkdir -p "$wheels/calculator"
download "$calc_pins" "$wheels/calculator"
mkdir -p "$wheels/convert"
download "$convert_pins" "$wheels/convert"

# Exactly the pinned files go into the tar (the download folder may hold other versions from earlier runs).
mkdir -p "$stage/pack/wheels" "$stage/pack/calculator-wheels" "$stage/pack/convert-wheels"
pick() {  # pick REQUIREMENTS SRC DEST
  local name version norm f found
  while IFS= read -r line; do
    line=${line%%#*}
    line=$(echo "$line" | tr -d '[:space:]')
    [ -n "$line" ] || continue
    name=${line%%==*}
    version=${line##*==}
    norm=$(echo "$name" | tr 'A-Z-.' 'a-z__')
    found=
    # one file per pin, even where the folder holds builds for several platform tags
    for f in "$2"/*.whl; do
      case "$(basename "$f" | tr 'A-Z' 'a-z')" in
        "$norm-$version-"*) ln "$f" "$3/" 2>/dev/null || cp "$f" "$3/"; found=1; break ;;
      esac
    done
    [ -n "$found" ] || { echo "no wheel for $line in $2" >&2; exit 1; }
  done < "$1"
}
pick "$pins" "$wheels" "$stage/pack/wheels"
pick "$calc_pins" "$wheels/calculator" "$stage/pack/calculator-wheels"
pick "$convert_pins" "$wheels/convert" "$stage/pack/convert-wheels"

rm -f "$out"/part_*
tar cf - -C "$stage/pack" wheels calculator-wheels convert-wheels | split -b "${part_mib}m" -d -a 2 - "$out/part_"
(cd "$out" && sha256sum part_* > SHA256SUMS)
n=$(ls "$stage/pack/wheels" | wc -l)
c=$(ls "$stage/pack/calculator-wheels" | wc -l)
v=$(ls "$stage/pack/convert-wheels" | wc -l)
size=$(du -cm "$out"/part_* | tail -1 | cut -f1)
echo "$n wheels + $c calculator + $v conversion wheels, ${size} MiB in $(ls "$out"/part_* | wc -l) parts of at most ${part_mib} MiB: $out"
