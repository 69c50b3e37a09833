#!/usr/bin/env bash
# Horovod 0.28.1 with PyTorch and MPI support, for the Horovod tests of `type: mpi` jobs.
# Only the 0.28.1 source archive exists, and against torch 2.13 it compiles only as C++17,
# so the archive is patched before building. The built wheel is cached (in
# $DISTRUN_WHEEL_CACHE, default ~/.cache/distrun-test-wheels) and later runs install it
# in seconds instead of rebuilding (about 2.5 minutes on 2 cores).
# Needs torch (10-python.sh) and Open MPI (20-openmpi.sh) first. The wheel is built with, and
# installed into, the Python environment the tests run in (python3 first on PATH).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/progress.sh"
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
version=0.28.1
if python3 -c "import horovod.torch" 2>/dev/null; then
    exit 0
fi
cache="$(wheel_cache)"
mkdir -p "$cache"
pyver="$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
torchver="$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')"
# The wheel links against this torch's C++ ABI, so the cache is keyed by the torch version.
slot="$cache/horovod-$version-torch$torchver-$pyver"

if ! ls "$slot"/horovod-*.whl >/dev/null 2>&1; then
    # The build runs pip itself (a fresh virtual environment has none) without build
    # isolation, so that it compiles against this environment's torch.
    pip_install pip setuptools wheel packaging cloudpickle psutil pyyaml
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    with_progress "downloading the Horovod $version source" \
        python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        -d "$work" "horovod==$version"
    tar -xzf "$work"/horovod-"$version".tar.gz -C "$work"
    src="$work/horovod-$version"
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
        "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    grep -q 'CMAKE_CXX_STANDARD 17' "$src/horovod/torch/CMakeLists.txt"
    mkdir -p "$work/dist"
    HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        with_progress "building Horovod $version (about 2.5 minutes on 2 cores; cached for later runs)" \
        python3 -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
        -w "$work/dist" "$src"
    mkdir -p "$slot"
    cp "$work"/dist/horovod-*.whl "$slot/"
fi
pip_install "$slot"/horovod-*.whl
python3 -c "import horovod.torch"
