#!/usr/bin/env bash
# Open MPI (mpirun, plus the headers and mpicc that Horovod's build needs) and mpi4py,
# for `type: mpi` jobs and their tests.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
fi
if ! python3 -c "import mpi4py" 2>/dev/null; then
    pip_install mpi4py
fi
