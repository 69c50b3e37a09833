#!/usr/bin/env bash
# DeepSpeed (CPU) for the DeepSpeed tests of `type: pytorch`, `type: mpi` and DeepSpeed
# launcher jobs. Needs torch (10-python.sh) and, for its MPI discovery, mpi4py (20-openmpi.sh).
#
# torch stays at the version installed before: naming it in the same install keeps pip from
# replacing it with a newer (CUDA) wheel to satisfy DeepSpeed. DS_BUILD_OPS=0: no op is
# compiled at install time; DeepSpeed compiles the ones it uses when first loaded.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"

# DeepSpeed compiles its CPU ops with the system's C++ compiler (and ninja, a pip dependency).
if ! command -v g++ >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends g++ >/dev/null
fi
torch_version="$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')"

if ! python3 -c "import deepspeed" 2>/dev/null; then
    DS_BUILD_OPS=0 pip_install deepspeed "torch==$torch_version"
fi
test "$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')" = "$torch_version"

# On CPU every process group DeepSpeed opens loads its shared-memory allreduce op, compiled
# on first use (about 25 s) into ~/.cache/torch_extensions (TORCH_EXTENSIONS_DIR). Compiling
# it here once keeps that out of the tests; a second load only checks the cache.
python3 - <<'PY'
from deepspeed.accelerator import get_accelerator

builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
if builder is not None and builder.is_compatible():
    builder.load(verbose=False)
PY
