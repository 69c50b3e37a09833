#!/usr/bin/env bash
# The full test suite, on a fresh machine: a new virtual environment made from pyproject.toml,
# everything the tests need installed into it, then pytest in it.
# Usage: bash scripts/test.sh [pytest args...]      e.g. bash scripts/test.sh tests/unit tests/agent
#
# DISTRUN_TEST_WORKERS=N runs the tests on N pytest-xdist workers (tests/README.md, "Side by
# side"); the default, 0, runs them in this one process, as CI does. The 25 slowest tests are
# listed at the end.
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
bash "$here/setup-test-env.sh"
cd "$repo"
# A temporary folder of this run's own: pytest's shared one (/tmp/pytest-of-USER) keeps only the
# newest few runs, so a second suite on the same machine could remove this one's folders.
basetemp="$(mktemp -d "${TMPDIR:-/tmp}/distrun-tests-XXXXXX")"
trap 'rm -rf "$basetemp"' EXIT
python -m pytest -n "${DISTRUN_TEST_WORKERS:-0}" --dist loadgroup --durations=25 --basetemp="$basetemp/t" "$@"
