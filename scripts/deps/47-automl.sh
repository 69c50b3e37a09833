#!/usr/bin/env bash
# FLAML with its table models (the `automl` extra) for `type: automl` jobs: lightgbm, xgboost,
# scikit-learn. FLAML 2.3 fails on pandas 3; 2.7 and newer read it.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
if ! python3 -c "import flaml, lightgbm, xgboost, sklearn; from flaml import AutoML" 2>/dev/null; then
    pip_install "flaml[automl]>=2.7"
fi
