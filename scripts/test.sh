#!/usr/bin/env bash
# The full test suite, on a fresh machine: a new virtual environment made from pyproject.toml,
# everything the tests need installed into it, then pytest in it.
# Usage: bash scripts/test.sh [pytest args...]      e.g. bash scripts/test.sh tests/unit tests/agent
#
# The tests run on DISTRUN_TEST_WORKERS pytest-xdist workers (default 2), which overlap the
# tests' waits (cluster start-ups, requeues, jobs' grace periods); each cluster's tests and the
# real frameworks keep to one worker (tests/README.md, "Side by side"). DISTRUN_TEST_WORKERS=0
# runs them all in this one process. The 25 slowest tests are listed at the end.
#
# The environment is created fresh on every run in .test-venv/ of this checkout
# (DISTRUN_TEST_VENV puts it elsewhere); see scripts/lib/test-venv.sh. System packages the
# tests use (Open MPI, Slurm, munge, compilers) are installed system-wide by the deps steps.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
# shellcheck source=lib/test-venv.sh
source "$here/lib/test-venv.sh"
fresh_test_venv "${DISTRUN_TEST_VENV:-$repo/.test-venv}"
echo "== test environment: $VIRTUAL_ENV ($(python --version))"
# How much of the machine is free when the tests start: a failure for want of memory or cores
# (whoever used them) is then told apart from a failure of distrun.
echo "== machine: $(nproc) cores, $(awk '/MemAvailable/ {a=$2} /MemTotal/ {t=$2} END {printf "%.1f of %.1f GiB", a/1048576, t/1048576}' /proc/meminfo) memory available, load $(cut -d' ' -f1-3 /proc/loadavg)"
bash "$here/setup-test-env.sh"
cd "$repo"
# A temporary folder of this run's own: pytest's shared one (/tmp/pytest-of-USER) keeps only the
# newest few runs, so a second suite on the same machine could remove this one's folders.
basetemp="$(mktemp -d "${TMPDIR:-/tmp}/distrun-tests-XXXXXX")"
trap 'rm -rf "$basetemp"' EXIT
python -m pytest -n "${DISTRUN_TEST_WORKERS:-2}" --dist loadgroup --durations=25 --basetemp="$basetemp/t" "$@"
