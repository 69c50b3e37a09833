"""The ranks' MLflow token: an owner-only file of the job folder, read only as distrun wrote it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from distrun.backends.kubernetes.manifests import MLFLOW_TOKEN_KEY, MLFLOW_TOKEN_VARIABLE, _give_tracking_token
from distrun.metrics.rank_token import TOKEN_FILE, read_token, with_token, write_token


def test_the_token_file_is_the_owners_alone_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)
    try:
        write_token(tmp_path, "abc123")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / TOKEN_FILE).st_mode) == 0o600
    assert read_token(tmp_path) == "abc123"


def test_a_token_file_replaced_with_a_link_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("not-the-token")
    (tmp_path / TOKEN_FILE).symlink_to(tmp_path / "elsewhere")
    assert read_token(tmp_path) is None
    assert read_token(tmp_path / "missing") is None


def test_the_jobs_token_replaces_one_the_environment_had() -> None:
    assert with_token({"MLFLOW_TRACKING_TOKEN": "users", "A": "1"}, "jobs") == {
        "MLFLOW_TRACKING_TOKEN": "jobs",
        "A": "1",
    }
    assert with_token({"A": "1"}, None) == {"A": "1"}


def test_kubernetes_pods_get_the_token_from_the_secret_not_a_value() -> None:
    from types import SimpleNamespace

    layout = SimpleNamespace(object_name="job-x")
    container = {"name": "node", "env": [{"name": "A", "value": "1"}]}
    objects = [
        {"kind": "Secret", "stringData": {"remote-start-token": "t"}},
        {"kind": "JobSet", "spec": {"replicatedJobs": [{"template": {"spec": {"containers": [container]}}}]}},
    ]
    _give_tracking_token(objects, layout, "secret-token")  # type: ignore[arg-type]
    assert objects[0]["stringData"][MLFLOW_TOKEN_KEY] == "secret-token"
    ref = container["env"][-1]
    assert ref["name"] == MLFLOW_TOKEN_VARIABLE and ref["valueFrom"]["secretKeyRef"]["key"] == MLFLOW_TOKEN_KEY
    assert "secret-token" not in str(objects[1])


def test_a_containers_rank_gets_the_token_by_name_only_with_the_jobs_run() -> None:
    from distrun.agent.containers import passed_env
    from distrun.plan.model import ProcessSpec

    spec = ProcessSpec("rank_0", "rank", 0, 0, 0, 0, ("python",), {}, {}, "/", "std_log.txt", "0/0")
    inherited = {"MLFLOW_TRACKING_TOKEN": "jobs", "HOME": "/root"}
    assert passed_env(spec, {"MLFLOW_TRACKING_URI": "http://h:1"}, inherited) == {
        "MLFLOW_TRACKING_URI": "http://h:1",
        "MLFLOW_TRACKING_TOKEN": "jobs",
    }
    assert passed_env(spec, {"A": "1"}, inherited) == {"A": "1"}  # no run: the user's own stays outside
