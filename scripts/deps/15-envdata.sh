#!/usr/bin/env bash
# What the environment and data tests use, from the `test` extra: uv (building conda_file
# environments), fsspec + s3fs (s3:// inputs) and moto's S3-compatible server (on 127.0.0.1).
# 10-python.sh installs the extra on a fresh machine; this step adds them to an older one.
set -euo pipefail
cd "$DISTRUN_REPO"
if ! python3 -c "import uv, fsspec, s3fs, moto.server, boto3" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check "uv>=0.4" "fsspec>=2023.1" "s3fs>=2023.1" "moto[server]>=5"
fi
