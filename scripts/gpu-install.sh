#!/usr/bin/env bash
# On a GPU machine without a package index: install the parts made by scripts/gpu-wheels.sh, from the GPU image's
# locks with --require-hashes, and print the environment the harness runs with there.
#
#   scripts/gpu-install.sh PARTS_DIR PREFIX
#   eval "$(scripts/gpu-install.sh PARTS_DIR PREFIX)"   # then: harness prepare math --profile smoke-verl, harness run ...
#
# PREFIX/site holds gpu.lock's set (on top of the machine's Python 3.12 and its torch, which must be the lock's
# version unless the parts carry torch), PREFIX/calculator-site the MCP calculator's mcp<2 set, PREFIX/convert-site
# TRL for the model conversion only (verl must not see TRL: docker/README.md). PREFIX/envs/{serve,calculator} are the
# helper environments the harness finds through HARNESS_ENV_SERVE_CPU and HARNESS_ENV_CALCULATOR; PREFIX/bin/harness
# is the harness command; PREFIX/locks/gpu.lock is the lock a run's row names (HARNESS_PACKAGE_LOCK).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PARTS_DIR PREFIX" >&2; exit 2; }
parts=$(cd "$1" && pwd)
mkdir -p "$2"
prefix=$(cd "$2" && pwd)
python=${PYTHON:-python3}
(cd "$parts" && sha256sum -c --quiet SHA256SUMS) >&2
rm -rf "$prefix/unpacked" "$prefix/locks" && mkdir -p "$prefix/unpacked"
cat "$parts"/part_* | tar xf - -C "$prefix/unpacked"
mv "$prefix/unpacked/locks" "$prefix/locks"

# What the parts leave to the machine (its torch stack) must be there, at the lock's versions.
"$python" - "$prefix/locks/gpu.lock" "$prefix/locks/gpu.lock.machine" >&2 <<'EOF'
import importlib.metadata as m, re, sys
lock, machine = sys.argv[1:]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pins = {norm(a): b for a, b in re.findall(r"^([A-Za-z0-9][\w.-]*)==([^\s\\;]+)", open(lock).read(), re.M)}
wrong = []
for name in filter(None, open(machine).read().split()):
    try:
        have = m.version(name).split("+")[0]
    except m.PackageNotFoundError:
        have = None
    if name == "torch" and have != pins[name]:
        sys.exit(f"gpu-install: the machine's torch is {have}, gpu.lock pins {pins[name]}: carry torch (MACHINE_HAS='^$' for gpu-wheels.sh)")
    if have != pins[name]:
        wrong.append(f"{name} {have} (lock {pins[name]})")
if wrong:
    print("gpu-install: the machine's torch stack differs from gpu.lock in: " + ", ".join(wrong), file=sys.stderr)
EOF

for set in site:wheels:gpu.lock calculator-site:calculator-wheels:gpu-calculator.lock \
    convert-site:convert-wheels:gpu-convert.lock; do
  IFS=: read -r target wheels lock <<<"$set"
  rm -rf "${prefix:?}/$target"
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --require-hashes \
    --find-links "$prefix/unpacked/$wheels" --target "$prefix/$target" -r "$prefix/locks/$lock.carried" >&2
done
# Wheels built here from hash-checked sdists (their own hashes are not in the lock).
if ls "$prefix"/unpacked/sdist-wheels/*.whl >/dev/null 2>&1; then
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --upgrade \
    --target "$prefix/site" "$prefix"/unpacked/sdist-wheels/*.whl >&2
fi
# BFCL's checker (parts made with BFCL=1): its own environment, a venv of the machine's Python (the checker runs
# with -I, so PYTHONPATH cannot point it at a folder), and bfcl-eval itself beside the harness, whose data it reads.
data_path=""
if [ -d "$prefix/unpacked/bfcl-wheels" ]; then
  (cd "$prefix/unpacked/bfcl-wheels" && sha256sum -c --quiet "$prefix/locks/bfcl-wheels.sha256") >&2 \
    || { echo "gpu-install: a BFCL wheel does not match its hash" >&2; exit 1; }
  rm -rf "$prefix/envs/bfcl" "$prefix/bfcl-data-site"
  "$python" -m venv --without-pip "$prefix/envs/bfcl" >&2
  bfcl_site=$("$prefix/envs/bfcl/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$bfcl_site" \
    "$prefix"/unpacked/bfcl-wheels/*.whl >&2
  data=$(tr '-' '_' < "$prefix/locks/bfcl-data")
  "$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
    --target "$prefix/bfcl-data-site" "$prefix"/unpacked/bfcl-wheels/"$data"-*.whl >&2
  data_path=":$prefix/bfcl-data-site"
fi
rm -rf "$prefix/unpacked"
py=$(command -v "$python")
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$prefix/envs/serve/bin" "$prefix/envs/calculator/bin" "$prefix/bin"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$prefix/site" "$py" > "$prefix/envs/serve/bin/python"
printf '#!/bin/sh\nPYTHONPATH=%s:%s exec %s "$@"\n' "$prefix/calculator-site" "$prefix/site" "$py" \
  > "$prefix/envs/calculator/bin/python"
# The harness command, as the image's console script runs it (from this checkout, with the installed set).
printf '#!/bin/sh\nPYTHONPATH=%s:%s${PYTHONPATH:+:$PYTHONPATH} exec %s -m harness.cli "$@"\n' "$here" "$prefix/site" "$py" \
  > "$prefix/bin/harness"
chmod +x "$prefix"/envs/*/bin/python "$prefix/bin/harness"
echo "export PYTHONPATH=$here:$prefix/site$data_path PATH=$prefix/bin:$prefix/site/bin:\$PATH"
echo "export HARNESS_ENV_SERVE_CPU=$prefix/envs/serve HARNESS_ENV_CALCULATOR=$prefix/envs/calculator"
echo "export HARNESS_CONVERT_PATH=$prefix/convert-site HARNESS_PACKAGE_LOCK=$prefix/locks/gpu.lock"
[ -z "$data_path" ] || echo "export HARNESS_ENV_BFCL=$prefix/envs/bfcl"
echo "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
