#!/usr/bin/env bash
# The Kubernetes backend's tests: the official client, the in-memory API emulator (kmock, and
# pytest-asyncio which its pytest plugin imports), kubernetes-validate and jsonschema for the
# offline schema checks, and util-linux's unshare (the test kubelet gives each pod its own
# /etc/hosts and folders in a mount namespace). No cluster is installed: none can run here.
set -euo pipefail
cd "$DISTRUN_REPO"
if ! python3 -c "import kubernetes, kmock, pytest_asyncio, kubernetes_validate, jsonschema" 2>/dev/null \
   || ! command -v kubernetes-validate >/dev/null 2>&1; then
    python3 -m pip install -q --disable-pip-version-check -e ".[test]"
fi
if ! command -v unshare >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends util-linux >/dev/null
fi
