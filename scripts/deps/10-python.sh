#!/usr/bin/env bash
# distrun itself (editable) with its test extras: pytest, hypothesis, torch 2.13.0 (CPU); and distrun's
# `mldesigner` (distributions/distrun-mldesigner), which the tests of function components import.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
cd "$DISTRUN_REPO"
if ! python3 -c "import distrun, pytest, hypothesis, torch, numpy" 2>/dev/null \
   || [ "$(python3 -c 'import distrun,os;print(os.path.dirname(distrun.__file__))')" != "$DISTRUN_REPO/src/distrun" ]; then
    pip_install -e ".[test]"
fi
if [ "$(python3 -c 'import mldesigner,os;print(os.path.dirname(mldesigner.__file__))' 2>/dev/null)" \
     != "$DISTRUN_REPO/distributions/distrun-mldesigner/src/mldesigner" ]; then
    pip_install -e ./distributions/distrun-mldesigner
fi
