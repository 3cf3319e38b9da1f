#!/usr/bin/env bash
# The pytest part of `make test`: the Docker tests (mostly waiting on containers and their servers) run beside the
# other tests, each group in its own pytest process, so a 2-core machine keeps both cores busy. (A third process for
# the end-to-end math run made nothing faster: the cores are the limit, and the main group took as long without
# it.) Each group's summary is printed; the exit code fails if either group fails. Arguments go to both processes.
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

# Two pytest processes share the cores: the torch they run in-process lets its waiting threads sleep, as the
# harness's own servers and trainers do (harness/serving/cores.py; spinning, one beside the other ran up to 10x slower).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

# Both groups use the smoke model: convert it once before they start, not twice at the same time.
.venv/bin/harness prepare math >/dev/null

logdir=.cache/test-logs
mkdir -p "$logdir"
started=$(date +%s)
# beside NAME LOG PYTEST_ARGS...: one pytest process in the background; its log ends with when it finished.
beside() {
    local name=$1 log=$2
    shift 2
    echo "== $name: running beside the others (log: $log)"
    # the arguments after "--" are a second pytest run, after the first, in the same background process
    local first=() then=() seen=0
    for arg in "$@"; do
        if [ "$arg" = -- ]; then seen=1; elif [ "$seen" = 1 ]; then then+=("$arg"); else first+=("$arg"); fi
    done
    (
        child=
        trap '[ -n "$child" ] && kill "$child" 2>/dev/null' INT TERM  # stopping the group stops its pytest
        "$PY" -m pytest "${first[@]}" &
        child=$!
        wait "$child"
        rc=$?
        echo "== $name: first part finished after $(( $(date +%s) - started )) s (exit $rc)"
        if [ "${#then[@]}" -gt 0 ]; then
            "$PY" -m pytest "${then[@]}" &
            child=$!
            wait "$child"
            rc2=$?
            { [ "$rc2" = 0 ] || [ "$rc2" = 5 ]; } || rc=$rc2
            [ "$rc" = 5 ] && rc=$rc2
        fi
        echo "== $name finished after $(( $(date +%s) - started )) s (exit $rc)"
        exit $rc
    ) >"$log" 2>&1 &
}
# The docker tests leave their process idle for minutes before the others are done: a few long end-to-end files
# (about 750 s together in CI) follow them in the same process, so two pytest processes run from start to end, both
# busy until about the same time (never three: the cores are the limit).
LATER=(tests/test_e2e_tau2.py tests/test_engine_matrix.py tests/test_reproduce.py tests/test_user_simulator_key.py
    tests/test_tau2_oracle.py)
beside "docker tests, then ${LATER[*]}" "$logdir/docker.log" -m docker "$@" -- "$@" "${LATER[@]}"
docker_pid=$!
trap 'kill "$docker_pid" 2>/dev/null' EXIT INT TERM
# The timing-sensitive reliability tests (signals, clean-up deadlines) go last, when the docker tests are done or
# nearly so; everything else first, in the usual order.
mapfile -t first < <(find tests -mindepth 1 -maxdepth 1 \( -name 'test_*.py' -o -type d \) ! -name reliability \
    ! -name __pycache__ | grep -vxF -f <(printf '%s\n' "${LATER[@]}") | sort)
"$PY" -m pytest -m "not docker" "$@" "${first[@]}" tests/reliability
rest=$?
echo "== other tests finished after $(( $(date +%s) - started )) s; waiting for the docker tests"
wait "$docker_pid"
docker=$?
trap - EXIT INT TERM
cat "$logdir/docker.log"
# pytest's exit 5 means no test was selected (a group can be empty on a machine without Docker): not a failure
for rc in "$rest" "$docker"; do
    [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
done
