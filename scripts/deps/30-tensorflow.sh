#!/usr/bin/env bash
# TensorFlow (CPU build) and tf-keras, for the TensorFlow job tests and examples.
# Keras 3 does not work under MultiWorkerMirroredStrategy or ParameterServerStrategy, so the
# examples set TF_USE_LEGACY_KERAS=1, which makes `tf.keras` the tf-keras package.
set -euo pipefail
if python3 -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('tensorflow') and u.find_spec('tf_keras') else 1)" 2>/dev/null; then
    exit 0
fi
pip=(python3 -m pip install -q --disable-pip-version-check)
if ! python3 -c "import tensorflow" 2>/dev/null; then
    "${pip[@]}" tensorflow-cpu
fi
# tf-keras requires the `tensorflow` distribution, which would pull a second copy of
# TensorFlow next to tensorflow-cpu: install it without dependencies, matched to the
# installed TensorFlow's minor version (tf-keras 2.N goes with TensorFlow 2.N).
minor="$(python3 -c 'import tensorflow as tf; print(".".join(tf.__version__.split(".")[:2]))' 2>/dev/null)"
"${pip[@]}" --no-deps "tf-keras~=${minor}.0" || "${pip[@]}" --no-deps tf-keras
