#!/usr/bin/env bash
# podman for jobs with `environment.image` on local compute and their tests
# (tests/engines/local/test_local_containers.py): runc, the runtime distrun runs it with,
# catatonit for `--init`, uidmap for rootless `--userns=keep-id`. The tests build their image
# from this machine's own files: nothing is pulled.
set -euo pipefail
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || ! command -v catatonit >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends podman runc catatonit uidmap >/dev/null
fi
