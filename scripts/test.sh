#!/usr/bin/env bash
# The full test suite, on a fresh machine: install what the tests need, then run them.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup-test-env.sh"
cd "$here/.."
exec python3 -m pytest "$@"
