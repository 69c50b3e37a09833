#!/usr/bin/env bash
# The web UI and metrics tests: the `ui` and `mlflow` extras, Selenium, and a real browser
# (Debian's chromium and its driver; Selenium's own manager cannot download one offline).
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
cd "$DISTRUN_REPO"
if ! python3 -c "import starlette, jinja2, uvicorn, httpx, selenium, mlflow" 2>/dev/null; then
    pip_install -e ".[test]"
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ]; then sudo_cmd="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
    $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
        chromium chromium-driver fonts-dejavu-core >/dev/null
fi
