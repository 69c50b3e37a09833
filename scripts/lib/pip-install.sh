# Sourced by the scripts/deps steps: pip_install PACKAGE... installs into the Python
# environment the tests run in. Under scripts/test.sh that is its fresh virtual environment,
# filled with uv from its cache; run on its own, a step installs with the pip of the python3
# first on PATH, as before.
pip_install() {
    if [ -n "${DISTRUN_UV:-}" ] && [ -n "${VIRTUAL_ENV:-}" ]; then
        "$DISTRUN_UV" pip install -q --python "$VIRTUAL_ENV/bin/python" "$@"
    else
        python3 -m pip install -q --disable-pip-version-check "$@"
    fi
}

# The folder where the deps steps keep the wheels they build from source archives (Horovod,
# DeepSpeed, pyspark), so that each is built once per machine, not once per fresh environment.
wheel_cache() {
    echo "${DISTRUN_WHEEL_CACHE:-$HOME/.cache/distrun-test-wheels}"
}
