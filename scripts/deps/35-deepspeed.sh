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
    # DeepSpeed is published as a source archive only. It is built once (pure Python, no ops)
    # into a wheel kept in $DISTRUN_WHEEL_CACHE (default ~/.cache/distrun-test-wheels), so each
    # fresh test environment gets the very same files: torch then finds the op sources below
    # unchanged and reuses the compiled op instead of compiling it again.
    slot="${DISTRUN_WHEEL_CACHE:-$HOME/.cache/distrun-test-wheels}/deepspeed"
    if ! ls "$slot"/deepspeed-*.whl >/dev/null 2>&1; then
        pip_install pip
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
        DS_BUILD_OPS=0 python3 -m pip wheel -q --disable-pip-version-check --no-deps -w "$work" deepspeed
        mkdir -p "$slot"
        cp "$work"/deepspeed-*.whl "$slot/"
    fi
    pip_install "$slot"/deepspeed-*.whl "torch==$torch_version"
fi
test "$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')" = "$torch_version"

# On CPU every process group DeepSpeed opens loads its shared-memory allreduce op, compiled
# on first use (about 25 s on a quiet machine) into TORCH_EXTENSIONS_DIR (scripts/test.sh
# keeps one per test environment path). Compiling it here once keeps that out of the tests;
# a later load, in this or a later fresh environment at the same path, only checks the cache.
python3 - <<'PY'
from deepspeed.accelerator import get_accelerator

builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
if builder is not None and builder.is_compatible():
    builder.load(verbose=False)
PY
