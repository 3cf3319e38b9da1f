#!/usr/bin/env bash
# On a GPU machine without a package index: install the reference stack packed by scripts/reference-wheels.sh into
# a virtual environment of the machine's CPython 3.12, from reference.lock with --require-hashes.
#
#   scripts/reference-install.sh PARTS_DIR PREFIX
#
# PREFIX/ref is the environment (a venv, so the MCP calculator the sample starts with sys.executable finds its
# packages without PYTHONPATH, which the MCP client does not pass on). Prints the interpreter's path.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PARTS_DIR PREFIX" >&2; exit 2; }
parts=$(cd "$1" && pwd)
mkdir -p "$2"
prefix=$(cd "$2" && pwd)
python=${PYTHON:-python3}
(cd "$parts" && sha256sum -c --quiet SHA256SUMS) >&2
rm -rf "$prefix/unpacked" "$prefix/ref" && mkdir -p "$prefix/unpacked"
cat "$parts"/part_* | tar xf - -C "$prefix/unpacked"
(cd "$prefix/unpacked/sdist-wheels" && sha256sum -c --quiet ../locks/sdist-wheels.sha256) >&2
"$python" -m venv --without-pip "$prefix/ref" >&2
site=$("$prefix/ref/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --require-hashes \
  --find-links "$prefix/unpacked/wheels" --target "$site" -r "$prefix/unpacked/locks/reference.lock.carried" >&2
# Built here from the lock's hash-checked sdists (their wheels' hashes are in locks/sdist-wheels.sha256).
"$python" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile --target "$site" \
  "$prefix"/unpacked/sdist-wheels/*.whl >&2
mkdir -p "$prefix/ref/locks" && cp "$prefix/unpacked/locks/reference.lock" "$prefix/ref/locks/"
rm -rf "$prefix/unpacked"
echo "$prefix/ref/bin/python"
