# Sourced by scripts/test.sh: makes the virtual environment the test suite runs in.
#
# The environment is new on every run (removed, then created again), so the suite sees only
# what pyproject.toml and the scripts/deps steps install: a missing dependency declaration
# fails the tests here instead of failing users. uv makes that cheap: it installs from its
# cache (~/.cache/uv, UV_CACHE_DIR) by hardlinking, so a new environment with torch,
# TensorFlow and DeepSpeed takes seconds once the cache is warm.

# The uv executable (installed with python3's pip the first time, if it is not on PATH).
uv_bin() {
    if command -v uv >/dev/null 2>&1; then
        command -v uv
        return
    fi
    if ! python3 -c "import uv" 2>/dev/null; then
        python3 -m pip install -q --disable-pip-version-check "uv>=0.5" >&2
    fi
    python3 -c "import uv; print(uv.find_uv_bin())"
}

# uv reads its own settings (UV_* variables, uv.toml), not pip's. Where pip is configured to
# find packages elsewhere (a mirror, a folder of wheels such as torch's CPU build), uv gets
# the same places, so both install the same things. A UV_* variable already set wins.
uv_settings_from_pip() {
    local line section key value
    local -A setting=()
    while IFS= read -r line; do
        section="${line%%.*}"
        key="${line#*.}"
        key="${key%%=*}"
        value="${line#*=}"
        value="${value#\'}"
        value="${value%\'}"
        # `pip config list` merges the files per section; ":env:" holds PIP_* variables, which win.
        case "$section" in
            :env:) setting[$key]="$value" ;;
            global | install) [ -n "${setting[$key]:-}" ] || setting[$key]="$value" ;;
        esac
    done < <(python3 -m pip config list 2>/dev/null || true)

    if [ -n "${setting[index-url]:-}" ]; then
        export UV_INDEX_URL="${UV_INDEX_URL:-${setting[index-url]}}"
    fi
    if [ -n "${setting[extra-index-url]:-}" ]; then
        export UV_EXTRA_INDEX_URL="${UV_EXTRA_INDEX_URL:-${setting[extra-index-url]}}"
    fi
    if [ -n "${setting[find-links]:-}" ] && [ -z "${UV_FIND_LINKS:-}" ]; then
        # pip skips a folder that is not there, uv stops: pass on only the ones that exist.
        local links=() link
        for link in ${setting[find-links]}; do
            if [[ "$link" == *://* ]] || [ -d "$link" ]; then links+=("$link"); fi
        done
        if [ ${#links[@]} -gt 0 ]; then
            export UV_FIND_LINKS="$(IFS=,; echo "${links[*]}")"
        fi
    fi
    if [ -n "${setting[constraint]:-}" ]; then
        export UV_CONSTRAINT="${UV_CONSTRAINT:-${setting[constraint]}}"
    fi
    if [ -n "${setting[cert]:-}" ]; then
        export SSL_CERT_FILE="${SSL_CERT_FILE:-${setting[cert]}}"
    fi
    # pip takes the newest match across every index and folder; uv's default stops at the first
    # index that has the package (which would take PyPI's CUDA torch over a local CPU wheel).
    export UV_INDEX_STRATEGY="${UV_INDEX_STRATEGY:-unsafe-best-match}"
}

# Removes and creates the environment at $1 with python3's interpreter, and activates it for
# this shell and its children: VIRTUAL_ENV, its bin first on PATH (so `python`, `python3`,
# `distrun`, `horovodrun` in tests, jobs, Slurm steps and MPI ranks are the environment's).
fresh_test_venv() {
    local venv="$1" uv base key
    if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
        echo "error: $venv exists and is not a virtual environment; move it or set DISTRUN_TEST_VENV" >&2
        return 1
    fi
    uv="$(uv_bin)"
    uv_settings_from_pip
    base="$(python3 -c 'import sys; print(sys.executable)')"
    rm -rf "$venv"
    "$uv" venv -q --python "$base" "$venv"
    export VIRTUAL_ENV="$venv"
    # uv installs without compiling bytecode, so with PYTHONDONTWRITEBYTECODE set (some shells and
    # CI images set it) every process of the suite compiled torch, Ray and TensorFlow from source
    # again: about 3 s of CPU per `import torch` on the 2-core machine, and enough, under a second
    # suite's load, to make Ray's agents miss the raylet's 15 s start-up wait. Unset, the first
    # import writes __pycache__ into this environment and every later process reuses it.
    unset PYTHONDONTWRITEBYTECODE
    export PATH="$venv/bin:$PATH"
    export DISTRUN_UV="$uv"
    hash -r
    # Torch builds C++ extensions that a job compiles on first use (a DeepSpeed op other than the
    # one scripts/deps/35-deepspeed.sh installs compiled) into TORCH_EXTENSIONS_DIR, and rebuilds
    # them when their build command changes, which holds this environment's path. One folder
    # per environment path keeps the build across runs without checkouts rebuilding each other's.
    if [ -z "${TORCH_EXTENSIONS_DIR:-}" ]; then
        key="$(printf '%s' "$venv" | sha256sum | cut -c1-16)"
        export TORCH_EXTENSIONS_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/distrun-test/torch-extensions/$key"
    fi
}
