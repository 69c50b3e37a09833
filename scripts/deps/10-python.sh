#!/usr/bin/env bash
# distrun itself (editable) with its test extras: pytest, hypothesis, torch 2.13.0 (CPU); and distrun's
# `mldesigner` (distributions/distrun-mldesigner), which the tests of function components import.
set -euo pipefail
# shellcheck source=../lib/pip-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/pip-install.sh"
cd "$DISTRUN_REPO"

# pyspark (the `spark` extra) is published as a source archive only: 400 MB that uv fetches and
# builds again (about 30 s) whenever the index does not confirm its cached copy. A wheel of it,
# built once and kept in $DISTRUN_WHEEL_CACHE (default ~/.cache/distrun-test-wheels), is offered
# beside the index; for the same version uv takes the wheel. Only with uv (scripts/test.sh): a
# step run on its own installs with pip, which keeps its own wheels of source archives.
spark_wheels="$(wheel_cache)/pyspark"
if [ -n "${DISTRUN_UV:-}" ]; then
    mkdir -p "$spark_wheels"
    export UV_FIND_LINKS="${UV_FIND_LINKS:+$UV_FIND_LINKS,}$spark_wheels"
fi

if ! python3 -c "import distrun, pytest, hypothesis, torch, numpy" 2>/dev/null \
   || [ "$(python3 -c 'import distrun,os;print(os.path.dirname(distrun.__file__))')" != "$DISTRUN_REPO/src/distrun" ]; then
    pip_install -e ".[test]"
fi
if [ "$(python3 -c 'import mldesigner,os;print(os.path.dirname(mldesigner.__file__))' 2>/dev/null)" \
     != "$DISTRUN_REPO/distributions/distrun-mldesigner/src/mldesigner" ]; then
    pip_install -e ./distributions/distrun-mldesigner
fi

if [ -n "${DISTRUN_UV:-}" ]; then
    spark_version="$(python3 -c 'from importlib.metadata import version; print(version("pyspark"))')"
    if ! ls "$spark_wheels"/pyspark-"$spark_version"-*.whl >/dev/null 2>&1; then
        # The version just installed was built from its source archive: keep a wheel of it.
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
        pip_install pip
        python3 -m pip wheel -q --disable-pip-version-check --no-deps -w "$work" "pyspark==$spark_version"
        cp "$work"/pyspark-*.whl "$spark_wheels/"
    fi
fi
