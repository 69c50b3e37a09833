#!/usr/bin/env bash
# Installs everything the test suite uses: each scripts/deps/*.sh installs one topic
# (Python packages, Open MPI, TensorFlow, Slurm, ...). Each step skips what is present,
# so a second run takes seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DISTRUN_REPO="$(cd "$here/.." && pwd)"
for step in "$here"/deps/*.sh; do
    echo "== setup: $(basename "$step")"
    bash "$step"
done
