"""Which tracking URIs reach ranks on other hosts, and what a Kubernetes job's pods get of the
job's MLflow run: rendered as submitted, from bindings that carry the run's variables."""

from __future__ import annotations

import base64
import io
import json
import socket
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from distrun.backends.kubernetes.backend import BACKEND
from distrun.backends.kubernetes.manifests import BUNDLE_KEY
from distrun.loading.loader import load_job_file
from distrun.metrics import tracking_server
from distrun.metrics.rank_route import UNREACHABLE_URI, advertised_name, this_machine_only, wanted_address
from distrun.prepare.compute import ComputeTarget
from distrun.prepare.submission import PreparedJob, bind
from distrun.store.layout import Layout
from support.cli import REPO

JOB = REPO / "examples" / "pytorch-ddp" / "job.yml"
BUILT_ENV = {"PATH": "/home/me/.distrun/envs/abc/bin:/usr/bin", "VIRTUAL_ENV": "/home/me/.distrun/envs/abc"}


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:5000",
        "http://127.3.2.1:5000",
        "http://localhost:5000",
        "https://[::1]:443",
        "http://0.0.0.0:5000",
        "http://[::]:5000",
        "sqlite:////home/me/.distrun/mlflow.db",
        "file:///tmp/mlruns",
        "/tmp/mlruns",
        "./mlruns",
        "postgresql://user@localhost/mlflow",
    ],
)
def test_uris_that_mean_this_machine(uri: str) -> None:
    assert this_machine_only(uri)


@pytest.mark.parametrize(
    "uri",
    [
        "http://10.0.0.5:5000",
        "http://head.cluster.internal:5000",
        "https://mlflow.example.com",
        "http://[fd00::5]:5000",
        "databricks",
        "databricks://my-profile",
        "postgresql://user@db.internal/mlflow",
    ],
)
def test_uris_that_lead_elsewhere(uri: str) -> None:
    assert not this_machine_only(uri)


def test_the_advertised_name_is_the_given_one_else_the_bound_address_else_the_host_name() -> None:
    assert advertised_name("10.0.0.5", "head.cluster") == "head.cluster"
    assert advertised_name("10.0.0.5", None) == "10.0.0.5"
    assert advertised_name("127.0.0.1", "") == "127.0.0.1"
    # Every interface: 0.0.0.0 in a URI would mean the rank's own host, so this machine's name.
    assert advertised_name("0.0.0.0", None) == socket.gethostname()
    assert advertised_name("::", None) == socket.gethostname()


def test_a_job_asking_for_another_address_than_the_running_server_has_is_told_what_its_ranks_get() -> None:
    state = {"host": "127.0.0.1", "advertise": "127.0.0.1", "port": 41234}
    assert wanted_address({}) == ("127.0.0.1", "127.0.0.1")
    assert tracking_server.other_address(state, {}) is None  # nothing asked: this machine's ranks reach it
    assert tracking_server.other_address(state, {"DISTRUN_MLFLOW_HOST": "127.0.0.1"}) is None
    said = tracking_server.other_address(
        state, {"DISTRUN_MLFLOW_HOST": "0.0.0.0", "DISTRUN_MLFLOW_ADVERTISE": "login-1.cluster"}
    )
    assert said is not None
    assert "DISTRUN_MLFLOW_HOST=0.0.0.0" in said and "login-1.cluster" in said
    assert "http://127.0.0.1:41234" in said  # what this job's ranks get instead
    served = {"host": "0.0.0.0", "advertise": "login-1.cluster", "port": 41234}
    assert tracking_server.other_address(served, {"DISTRUN_MLFLOW_ADVERTISE": "login-1.cluster"}) is not None
    wanted = {"DISTRUN_MLFLOW_HOST": "0.0.0.0", "DISTRUN_MLFLOW_ADVERTISE": "login-1.cluster"}
    assert tracking_server.other_address(served, wanted) is None


def render_with(home: Path, mlflow: dict[str, str]) -> tuple[dict, tuple[str, ...], dict]:
    """The job rendered for Kubernetes as submit renders it, its bindings carrying a built
    environment and `mlflow` (the run's variables): (plan, notes, the ConfigMap's bindings)."""
    loaded = load_job_file(str(JOB), ())
    layout = Layout(home)
    folder = layout.job("tracked")
    bindings = bind(loaded, loaded.spec, folder, materialize=False)
    bindings = replace(bindings, environment={**BUILT_ENV, **mlflow})
    target = ComputeTarget("cluster", "kubernetes", {"namespace": "ml", "jobset": "always", "image": "reg/distrun:1"})
    rendered = BACKEND.render(PreparedJob("tracked", loaded.spec, folder, target, bindings), layout, code_dir=None)
    shown = rendered.show()
    [configmap] = [o for o in shown["objects"] if o["kind"] == "ConfigMap"]
    bundle = base64.b64decode(configmap["binaryData"][BUNDLE_KEY])
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        member = tar.extractfile("bindings.json")
        assert member is not None
        shipped = json.loads(member.read())
    return shown["plan"], rendered.notes, shipped


def run_variables(uri: str) -> dict[str, str]:
    return {
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_RUN_ID": "0123abcd",
        "MLFLOW_EXPERIMENT_ID": "1",
        "MLFLOW_EXPERIMENT_NAME": "ddp",
    }


def process_envs(plan: dict) -> list[dict[str, str]]:
    return [p["env"] for n in plan["nodes"] for p in n["processes"]]


def test_pods_get_a_run_whose_uri_leads_off_this_machine(tmp_path: Path) -> None:
    mlflow = run_variables("http://head.cluster.internal:41234")
    plan, notes, shipped = render_with(tmp_path, mlflow)
    for env in process_envs(plan):
        assert {k: env.get(k) for k in mlflow} == mlflow
        assert "VIRTUAL_ENV" not in env  # this machine's built environment is not the pods'
    assert shipped["environment"] == mlflow  # what the pods rebuild their plan from
    assert any("http://head.cluster.internal:41234" in note and "0123abcd" in note for note in notes)


def test_pods_get_no_run_on_this_machines_loopback_and_the_plan_says_what_to_set(tmp_path: Path) -> None:
    plan, notes, shipped = render_with(tmp_path, run_variables("http://127.0.0.1:41234"))
    for env in process_envs(plan):
        assert not [k for k in env if k.startswith("MLFLOW_")]
    assert shipped["environment"] == {}
    [said] = [note for note in notes if note.startswith("MLflow:")]
    assert "http://127.0.0.1:41234" in said and "stays empty" in said
    assert "DISTRUN_MLFLOW_HOST=" in said and "DISTRUN_MLFLOW_ADVERTISE=" in said


def test_pods_of_a_job_whose_server_could_not_start_fail_their_calls_at_once_as_local_ranks_do(tmp_path: Path) -> None:
    mlflow = {**run_variables(UNREACHABLE_URI), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    plan, notes, shipped = render_with(tmp_path, mlflow)
    assert shipped["environment"] == mlflow
    for env in process_envs(plan):
        assert env["MLFLOW_RUN_ID"] == "0123abcd" and env["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"
    assert not [note for note in notes if note.startswith("MLflow:")]


def test_distrun_plan_says_where_the_pods_run_would_log_before_any_run_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrun.backends.kubernetes.backend import preview

    target = ComputeTarget("cluster", "kubernetes", {"namespace": "ml", "jobset": "always", "image": "reg/distrun:1"})

    def mlflow_notes() -> list[str]:
        rendered = preview(load_job_file(str(JOB), ()), Layout(tmp_path), target, "planned")
        for env in process_envs(rendered.show()["plan"]):
            assert not [k for k in env if k.startswith("MLFLOW_")]  # no run is made by `distrun plan`
        return [note for note in rendered.notes if note.startswith("MLflow:")]

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("DISTRUN_MLFLOW", "0")
    assert mlflow_notes() == []  # no run would be made
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")
    [said] = mlflow_notes()
    assert "http://127.0.0.1:PORT" in said and "stays empty" in said and "DISTRUN_MLFLOW_HOST=" in said
    monkeypatch.setenv("DISTRUN_MLFLOW_HOST", "0.0.0.0")
    monkeypatch.setenv("DISTRUN_MLFLOW_ADVERTISE", "login-1.cluster")
    reached = "MLflow: every rank logs to the job's run at {}; the pods must reach it"
    assert mlflow_notes() == [reached.format("http://login-1.cluster:PORT")]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    assert mlflow_notes() == [reached.format("https://mlflow.example.com")]
