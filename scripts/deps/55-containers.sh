#!/usr/bin/env bash
# podman (with runc, the runtime distrun runs it with) for jobs with `environment.image` on
# local compute and their tests (tests/engines/local/test_local_containers.py). The tests build
# their image from this machine's own files: nothing is pulled.
set -euo pipefail
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends podman runc >/dev/null
fi
