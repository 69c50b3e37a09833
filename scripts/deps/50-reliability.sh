#!/usr/bin/env bash
# Tools the fault-injection tests (tests/reliability) use: mount/umount for the small tmpfs
# of the disk-full tests, setsid and nohup for daemonizing ranks, env -i, head. Mounting needs
# root, which the test machines have.
set -euo pipefail
missing=()
command -v mount >/dev/null 2>&1 && command -v umount >/dev/null 2>&1 && command -v setsid >/dev/null 2>&1 \
    || missing+=(util-linux mount)
command -v nohup >/dev/null 2>&1 && command -v head >/dev/null 2>&1 && command -v env >/dev/null 2>&1 \
    || missing+=(coreutils)
if [ "${#missing[@]}" -gt 0 ]; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
