#!/usr/bin/env bash
# On a GPU machine without a package index: install the parts made by scripts/gpu-wheels.sh and print the
# environment the harness runs with there.
#
#   scripts/gpu-install.sh PARTS_DIR PREFIX
#   eval "$(scripts/gpu-install.sh PARTS_DIR PREFIX)"   # then: harness prepare math --profile smoke-verl, harness run ...
#
# PREFIX/site holds the training and serving set (on top of the machine's Python 3.12 and torch),
# PREFIX/calculator-site the MCP calculator's mcp<2 set, PREFIX/convert-site TRL for the model conversion only
# (verl must not see TRL: docker/README.md). PREFIX/envs/{serve,calculator} are the helper environments the
# harness finds through HARNESS_ENV_SERVE_CPU and HARNESS_ENV_CALCULATOR.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PARTS_DIR PREFIX" >&2; exit 2; }
parts=$(cd "$1" && pwd)
mkdir -p "$2"
prefix=$(cd "$2" && pwd)
python=${PYTHON:-python3}
(cd "$parts" && sha256sum -c --quiet SHA256SUMS) >&2
rm -rf "$prefix/unpacked" && mkdir -p "$prefix/unpacked"
cat "$parts"/part_* | tar xf - -C "$prefix/unpacked"
for set in site:wheels calculator-site:calculator-wheels convert-site:convert-wheels; do
  "$python" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$prefix/${set%%:*}" \
    "$prefix/unpacked/${set#*:}"/*.whl >&2
done
rm -rf "$prefix/unpacked"
py=$(command -v "$python")
mkdir -p "$prefix/envs/serve/bin" "$prefix/envs/calculator/bin"
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$prefix/site" "$py" > "$prefix/envs/serve/bin/python"
printf '#!/bin/sh\nPYTHONPATH=%s:%s exec %s "$@"\n' "$prefix/calculator-site" "$prefix/site" "$py" \
  > "$prefix/envs/calculator/bin/python"
chmod +x "$prefix"/envs/*/bin/python
here=$(cd "$(dirname "$0")/.." && pwd)
echo "export PYTHONPATH=$here:$prefix/site PATH=$prefix/site/bin:\$PATH"
echo "export HARNESS_ENV_SERVE_CPU=$prefix/envs/serve HARNESS_ENV_CALCULATOR=$prefix/envs/calculator"
echo "export HARNESS_CONVERT_PATH=$prefix/convert-site"
echo "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
