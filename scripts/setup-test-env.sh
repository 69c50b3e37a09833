#!/usr/bin/env bash
# Installs everything the test suite uses: each scripts/deps/*.sh installs one topic
# (Python packages, Open MPI, TensorFlow, Slurm, ...). Each step skips what is present,
# so a second run takes seconds. Python packages go into the environment whose python3 is
# first on PATH: scripts/test.sh makes a fresh virtual environment and puts it there first;
# run on its own, this fills the python3 you have. System packages (apt) go system-wide.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DISTRUN_REPO="$(cd "$here/.." && pwd)"
# Each step's seconds are printed: the setup is part of the suite's time budget.
for step in "$here"/deps/*.sh; do
    started=$SECONDS
    echo "== setup: $(basename "$step")"
    bash "$step"
    echo "== setup: $(basename "$step"): $((SECONDS - started)) s"
done
