# shellcheck shell=bash
# Shared by the cluster tests: source it, then `cluster_require STATE`. A test whose cluster is
# not up skips (77) with the reason the fixture's `up` gave, since CTest runs a fixture's tests
# even when its setup test skipped.
cluster_require() {
    local state=$1
    if [ ! -s "$state/id" ] || [ ! -s "$state/env.sh" ]; then
        echo "SKIP: no emulated cluster at $state: $(tail -n 1 "$state/log/up.err" 2>/dev/null || echo 'its fixture did not bring one up')"
        exit 77
    fi
    # shellcheck disable=SC1091
    . "$state/env.sh"
}

# The tests' own processes run under `timeout`: a hung launch fails the test, never CI.
run_limited() { # seconds command...
    local limit=$1
    shift
    timeout --kill-after=10 "$limit" "$@"
}
