#!/usr/bin/env bash
# Ray (the `ray` extra) for the Ray backend and `distribution: {type: ray}`, and the tools the
# Ray test cluster uses: it runs inside a network namespace that has only the loopback
# interface (unshare and nsenter from util-linux, ip from iproute2), so that no test traffic
# ever leaves 127.0.0.0/8 (Ray advertises the machine's external address otherwise).
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
if ! python3 -c "import ray, ray.util.placement_group" 2>/dev/null; then
    pip_install "ray[default]>=2.40"
fi
missing=()
command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ "${#missing[@]}" -gt 0 ]; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
