#!/usr/bin/env bash
# The pytest part of `make test`: the Docker tests (mostly waiting on containers and their servers) run beside the
# other tests, each group in its own pytest process, so a 2-core machine keeps both cores busy. Each group's
# summary is printed; the exit code fails if either group fails. Arguments go to both pytest processes.
# TEST_GROUPS=1, or a -m/-k/path argument, runs one pytest process as usual.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

single=0
[ "${TEST_GROUPS:-2}" = 1 ] && single=1
for arg in "$@"; do
    case "$arg" in -m|-k|-m*|-k*|tests*|*.py*) single=1 ;; esac
done
if [ "$single" = 1 ]; then
    exec "$PY" -m pytest "$@"
fi

# Both groups use the smoke model: convert it once before they start, not twice at the same time.
.venv/bin/harness prepare math >/dev/null

logdir=.cache/test-logs
mkdir -p "$logdir"
started=$(date +%s)
echo "== docker tests: running beside the others (log: $logdir/docker.log)"
"$PY" -m pytest -m docker "$@" >"$logdir/docker.log" 2>&1 &
docker_pid=$!
trap 'kill "$docker_pid" 2>/dev/null' EXIT INT TERM
# The timing-sensitive reliability tests (signals, clean-up deadlines) go last, when the docker tests are done or
# nearly so; everything else first, in the usual order.
mapfile -t first < <(find tests -mindepth 1 -maxdepth 1 \( -name 'test_*.py' -o -type d \) ! -name reliability \
    ! -name __pycache__ | sort)
"$PY" -m pytest -m "not docker" "$@" "${first[@]}" tests/reliability
rest=$?
echo "== other tests finished after $(( $(date +%s) - started )) s; waiting for the docker tests"
wait "$docker_pid"
docker=$?
trap - EXIT INT TERM
echo "== docker tests finished after $(( $(date +%s) - started )) s (exit $docker):"
cat "$logdir/docker.log"
# pytest's exit 5 means no test was selected (a group can be empty on a machine without Docker): not a failure
[ "$rest" = 0 ] || [ "$rest" = 5 ] || exit "$rest"
[ "$docker" = 0 ] || [ "$docker" = 5 ] || exit "$docker"
