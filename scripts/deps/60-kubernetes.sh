#!/usr/bin/env bash
# The Kubernetes backend's tests: the official client, the in-memory API emulator (kmock, and
# pytest-asyncio which its pytest plugin imports), kubernetes-validate and jsonschema for the
# offline schema checks, and util-linux's unshare (the test kubelet gives each pod its own
# /etc/hosts and folders in a mount namespace). No cluster is installed: none can run here.
# 10-python.sh installs them with the `test` extra on a fresh machine; this adds them to an older one.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
cd "$DISTRUN_REPO"
if ! python3 -c "import kubernetes, kmock, pytest_asyncio, kubernetes_validate, jsonschema" 2>/dev/null; then
    pip_install "kubernetes>=30" "kmock>=0.8,<0.9" "pytest-asyncio>=0.23" "kubernetes-validate>=1.30" "jsonschema>=4.18"
fi
if ! command -v unshare >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends util-linux >/dev/null
fi
