#!/usr/bin/env bash
# DeepSpeed (CPU) for the DeepSpeed tests of `type: pytorch`, `type: mpi` and DeepSpeed
# launcher jobs. Needs torch (10-python.sh) and, for its MPI discovery, mpi4py (20-openmpi.sh).
#
# torch stays at the version installed before: naming it in the same install keeps pip from
# replacing it with a newer (CUDA) wheel to satisfy DeepSpeed.
#
# On CPU every process group DeepSpeed opens loads its shared-memory allreduce op, which a plain
# install compiles on first use (about a minute on 2 cores) into TORCH_EXTENSIONS_DIR, whose
# build torch keys by the environment's path: every fresh test environment compiled it again.
# DeepSpeed is published as a source archive only; it is built here once into a wheel with that
# op compiled in (DS_BUILD_SHM_COMM=1, no other op), kept in $DISTRUN_WHEEL_CACHE (default
# ~/.cache/distrun-test-wheels) per torch and Python version, and every fresh environment
# installs that wheel: DeepSpeed then loads the op as it loads any op built at install time.
set -euo pipefail
# shellcheck source=../lib/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/progress.sh"
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"

# The op is compiled with the system's C++ compiler (and ninja, a pip dependency of DeepSpeed).
if ! command -v g++ >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends g++ >/dev/null
fi
torch_version="$(python3 -c 'from importlib.metadata import version; print(version("torch").split("+")[0])')"
pyver="$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"

# Whether the DeepSpeed installed here carries the compiled op (its files, without importing it).
has_op() {
    python3 - <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, files
try:
    found = any("deepspeed_shm_comm_op" in str(path) for path in files("deepspeed") or [])
except PackageNotFoundError:
    found = False
sys.exit(0 if found else 1)
PY
}

if ! has_op; then
    slot="$(wheel_cache)/deepspeed-torch$torch_version-$pyver"
    if ls "$slot"/deepspeed-*.whl >/dev/null 2>&1; then
        pip_install "$slot"/deepspeed-*.whl "torch==$torch_version"
    else
        # DeepSpeed's dependencies first (and DeepSpeed without ops): the build below runs in
        # this environment, against its torch.
        pip_install deepspeed "torch==$torch_version" pip setuptools wheel
        version="$(python3 -c 'from importlib.metadata import version; print(version("deepspeed"))')"
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
        # --no-cache-dir: pip's cache may hold a wheel of the same version built without the op.
        with_progress "building DeepSpeed $version with its CPU op (about 3 minutes on 2 cores; cached for later runs)" \
            env DS_ACCELERATOR=cpu DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 python3 -m pip wheel -q --disable-pip-version-check --no-cache-dir --no-build-isolation --no-deps \
            -w "$work" "deepspeed==$version"
        mkdir -p "$slot"
        cp "$work"/deepspeed-*.whl "$slot/"
        pip_install --no-deps --force-reinstall "$slot"/deepspeed-*.whl
    fi
fi
test "$(python3 -c 'from importlib.metadata import version; print(version("torch").split("+")[0])')" = "$torch_version"
has_op || { echo "error: the installed DeepSpeed has no compiled shared-memory op" >&2; exit 1; }
