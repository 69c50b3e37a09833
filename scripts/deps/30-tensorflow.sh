#!/usr/bin/env bash
# TensorFlow (CPU build) and tf-keras, for the TensorFlow job tests and examples.
# Keras 3 does not work under MultiWorkerMirroredStrategy or ParameterServerStrategy, so the
# examples set TF_USE_LEGACY_KERAS=1, which makes `tf.keras` the tf-keras package.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
if python3 -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('tensorflow') and u.find_spec('tf_keras') else 1)" 2>/dev/null; then
    exit 0
fi
# Asked without importing TensorFlow (10 to 25 s of CPU here): the tests import it soon enough.
if ! python3 -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('tensorflow') else 1)" 2>/dev/null; then
    pip_install tensorflow-cpu
fi
# tf-keras requires the `tensorflow` distribution, which would pull a second copy of
# TensorFlow next to tensorflow-cpu: install it without dependencies, matched to the
# installed TensorFlow's minor version (tf-keras 2.N goes with TensorFlow 2.N).
minor="$(python3 - <<'PY'
from importlib.metadata import PackageNotFoundError, version

for name in ("tensorflow-cpu", "tensorflow"):
    try:
        print(".".join(version(name).split(".")[:2]))
        break
    except PackageNotFoundError:
        pass
PY
)"
pip_install --no-deps "tf-keras~=${minor}.0" || pip_install --no-deps tf-keras
