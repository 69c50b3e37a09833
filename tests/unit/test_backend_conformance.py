"""The backend contract (`distrun.backends.base`), checked once for every engine.

Each test is parametrized over the four engines, with what differs between them (messages,
hints, what the request shows) as expected values in its parameters. Everything runs in this
process with no cluster: Slurm and Ray render without one, Kubernetes too with `jobset:` set,
and `refuse_engines` fails any test in which an engine is asked, a process started or signalled.
The engine-specific behaviour behind the contract stays in each engine's own tests.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from distrun.agent.outcome import GangResult
from distrun.backends.base import Backend, RenderedJob
from distrun.backends.kubernetes.state import PodView, job_state
from distrun.backends.kubernetes.target import KubernetesSettings
from distrun.backends.local.backend import record_result
from distrun.backends.ray.driver import merged_end, record_end
from distrun.backends.ray.target import RaySettings
from distrun.backends.registry import BACKENDS, backend_for
from distrun.backends.slurm.state import SLURM_STATES, distrun_status
from distrun.backends.slurm.target import SlurmSettings
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.loading.loader import LoadedJob
from distrun.prepare.compute import ComputeTarget, add_target, resolve_target, submitted_target
from distrun.prepare.submission import PreparedJob, prepare_job
from distrun.runner.jobs import plan_job, submit_job
from distrun.store.index import JobIndex, JobRecord, process_start_time
from distrun.store.layout import Layout
from support.backend_contract import POD_LAYOUT, home_files, masked, pod, refuse_engines, unborn_pid
from support.job_files import load_text

ENGINES = ("local", "slurm", "ray", "kubernetes")
# kind -> (compute target name, its settings in config.yaml)
TARGETS: dict[str, tuple[str, dict[str, Any]]] = {
    "local": ("local", {}),
    "slurm": ("hpc", {"partition": "debug"}),
    "ray": ("rc", {"address": "10.0.0.5:6379"}),
    # An explicit form: with `jobset: auto` submit asks the cluster which one it can run.
    "kubernetes": ("cluster", {"namespace": "ml", "jobset": "always", "image": "reg/distrun:1"}),
}
JOB = """\
command: python train.py --epochs ${{inputs.epochs}} --model-dir ${{outputs.model}}
code: src
environment: {image: reg/distrun:1}
inputs: {epochs: 3}
outputs: {model: {type: uri_folder}}
resources: {instance_count: 2}
distribution: {type: pytorch, process_count_per_instance: 2}
"""
NAME = "conformance_job"


@pytest.fixture(autouse=True)
def in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_engines(monkeypatch)


@pytest.fixture
def home(distrun_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DISTRUN_HOME with one target of each cluster engine in its config.yaml."""
    # Unset, local compute asks nvidia-smi for this machine's GPUs while it renders; set, the
    # GPUs are the variable's (here none), as CUDA itself would see them.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    distrun_home.mkdir(parents=True)
    lines = ["compute:"]
    for kind, (name, settings) in TARGETS.items():
        if kind != "local":
            lines.append(f"  {name}: {{type: {kind}, " + ", ".join(f"{k}: '{v}'" for k, v in settings.items()) + "}")
    (distrun_home / "config.yaml").write_text("\n".join(lines) + "\n")
    return distrun_home


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedJob:
    """A job with code, an input and an output, so every binding a backend renders is there."""
    (tmp_path / "job" / "src").mkdir(parents=True)
    (tmp_path / "job" / "src" / "train.py").write_text("print('training')\n")
    return load_text(tmp_path / "job", JOB, [f"name={NAME}"])


def picked_ports(rendered: RenderedJob) -> list[int]:
    """The values a render picks afresh each time: local compute's free MASTER_PORT (its notes say
    ports are chosen when the job starts). Every other engine renders fixed placeholders."""
    return [rendered.plan.master_port] if rendered.kind == "local" else []


def prepared(layout: Layout, loaded: LoadedJob, kind: str) -> PreparedJob:
    """The job as submit prepares it (a record and a filled folder), before any engine has it."""
    target = resolve_target(TARGETS[kind][0], layout.config_path)
    return prepare_job(loaded, layout, target)


# The engines' client libraries: a call that imports one is on its way to an engine.
ENGINE_CLIENTS = ("ray", "kubernetes")


def clients_imported() -> set[str]:
    return {module for module in ENGINE_CLIENTS if module in sys.modules}


# ---------------------------------------------------------------- the registry


def test_the_suite_covers_every_registered_engine() -> None:
    # A Spark standalone target is the local backend (a subclass) running only Spark jobs, which
    # this suite's command job is not: tests/engines/spark runs a job on a real one.
    assert issubclass(backend_for("spark").__class__, type(backend_for("local")))
    assert set(BACKENDS) == {*ENGINES, "spark"}


@pytest.mark.parametrize("kind", ENGINES)
def test_the_registry_gives_each_engine_a_whole_backend(kind: str) -> None:
    backend = backend_for(kind)
    assert isinstance(backend, Backend) and backend.kind == kind
    assert not getattr(type(backend), "__abstractmethods__", None)
    assert backend.engine and backend.cancel_wait_s > 0


# ---------------------------------------------------------------- 1. render is pure and deterministic


@pytest.mark.parametrize(
    ("kind", "jobset_auto"),
    [
        *[pytest.param(kind, False, id=kind) for kind in ENGINES],
        # `jobset: auto` renders the JobSet form without asking the cluster which form it can run
        # (schedule asks), though the target names a kubeconfig with a server in it.
        pytest.param("kubernetes", True, id="kubernetes-jobset-auto"),
    ],
)
def test_render_writes_nothing_starts_nothing_and_asks_no_engine(
    kind: str, jobset_auto: bool, home: Path, loaded: LoadedJob, tmp_path: Path
) -> None:
    layout = Layout(home)
    job = prepared(layout, loaded, kind)
    if jobset_auto:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
            "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
            "contexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {}}]\n"
        )
        settings = {**job.target.settings, "jobset": "auto", "kubeconfig": str(kubeconfig)}
        job = replace(job, target=replace(job.target, settings=settings))
    before, clients = home_files(home), clients_imported()
    # The folder render is given exists here (as at submit): render must still write nothing into it.
    assert job.folder.root.is_dir()
    rendered = backend_for(kind).render(job, layout)
    assert home_files(home) == before
    assert clients_imported() == clients
    assert rendered.job is job and rendered.kind == kind
    if jobset_auto:
        assert any(note.startswith("jobset: auto - shown as one JobSet") for note in rendered.notes)


@pytest.mark.parametrize(
    ("kind", "placeholder_note"),
    [
        pytest.param("local", "ports are chosen when the job starts", id="local"),
        pytest.param("slurm", "hosts and ports below are placeholders", id="slurm"),
        pytest.param("ray", "hosts and ports below are placeholders", id="ray"),
        pytest.param("kubernetes", None, id="kubernetes"),  # pods have stable names and set ports
    ],
)
def test_render_is_deterministic_but_for_the_placeholders_its_notes_name(
    kind: str, placeholder_note: str | None, home: Path, loaded: LoadedJob
) -> None:
    layout = Layout(home)
    job = prepared(layout, loaded, kind)
    backend = backend_for(kind)
    first, second = backend.render(job, layout), backend.render(job, layout)
    if placeholder_note is not None:
        assert any(placeholder_note in note for note in first.notes), first.notes
    assert masked(first.show(), picked_ports(first)) == masked(second.show(), picked_ports(second))
    if not picked_ports(first):
        assert first.show() == second.show()  # fixed placeholders or none: the same, byte for byte


# ---------------------------------------------------------------- 2. plan shows what submit renders


@pytest.mark.parametrize(
    ("kind", "request_keys", "script_says", "never_noted"),
    [
        pytest.param("local", set(), (), (), id="local"),
        pytest.param(
            "slurm",
            {"script_name", "script"},
            ("#SBATCH --nodes=2", "#SBATCH --partition=debug", "-m distrun.backends.slurm.node_agent --job-dir"),
            (),
            id="slurm",
        ),
        pytest.param(
            "ray",
            {"placement", "script_name", "script"},
            ("ray.init(address='10.0.0.5:6379')", "strategy='STRICT_SPREAD'"),
            (),
            id="ray",
        ),
        # The ConfigMap carries the code snapshot: plan lists what submit ships, not a promise.
        pytest.param(
            "kubernetes",
            {"script_name", "script", "objects"},
            ("- code/train.py",),
            ("added to the ConfigMap when the job is submitted",),
            id="kubernetes",
        ),
    ],
)
def test_plan_shows_what_submit_renders_once_and_schedules(
    kind: str,
    request_keys: set[str],
    script_says: tuple[str, ...],
    never_noted: tuple[str, ...],
    home: Path,
    loaded: LoadedJob,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The job's image alone would run in containers on local compute where podman is installed
    # (test_container_run.py): here the same Python on every machine.
    monkeypatch.setenv("DISTRUN_CONTAINERS", "off")
    layout = Layout(home)
    before = home_files(home)
    plan = plan_job(loaded, layout, TARGETS[kind][0])
    assert home_files(home) == before  # no record, no job folder: only what the test wrote
    shown = plan.show()
    assert (shown["compute"], shown["type"]) == (TARGETS[kind][0], kind)
    assert shown["notes"] == list(plan.notes) and shown["plan"] == plan.plan.to_dict()
    assert set(shown) - {"compute", "type", "notes", "inputs", "runs_in", "timeouts", "plan"} == request_keys
    # What the processes run in: the pods' image on Kubernetes, else a Python on the machines.
    assert shown["runs_in"].startswith("image " if kind == "kubernetes" else "distrun's own Python (")
    for text in script_says:
        assert text in shown["script"]
    for text in never_noted:
        assert not any(text in note for note in shown["notes"])

    # The orchestrator's side of submit, with the engine's side replaced by a recorder: what is
    # checked is that submit renders once and hands that very object on. Each engine's own tests
    # (tests/engines/<engine>/) submit for real and check what the engine received.
    backend = backend_for(kind)
    render = backend.render
    rendered: list[RenderedJob] = []
    scheduled: list[RenderedJob] = []

    def counted(job: Any, layout: Layout) -> RenderedJob:
        rendered.append(render(job, layout))
        return rendered[-1]

    def schedule(request: RenderedJob, layout: Layout) -> JobRecord:
        scheduled.append(request)
        return JobIndex(layout.db_path).get(request.job.name)

    monkeypatch.setattr(backend, "render", counted)
    monkeypatch.setattr(backend, "schedule", schedule)
    # Preflight is the one step before the record that asks the engine (each engine's tests check it).
    monkeypatch.setattr(backend, "preflight", lambda target, spec: None)
    _, submitted = submit_job(loaded, layout, TARGETS[kind][0])
    assert len(rendered) == 1 and submitted is rendered[0]
    assert len(scheduled) == 1 and scheduled[0] is rendered[0]  # that very object, never a second rendering
    assert masked(submitted.show(), picked_ports(submitted)) == masked(shown, picked_ports(plan))


# ---------------------------------------------------------------- 3. cancel before the engine has the job


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        pytest.param("local", "canceled before it was running", id="local"),
        pytest.param("slurm", "canceled before it was submitted", id="slurm"),
        pytest.param("ray", "canceled before it was running", id="ray"),  # a driver on this machine, as local
        pytest.param("kubernetes", "canceled before it was submitted", id="kubernetes"),
    ],
)
def test_a_job_the_engine_never_got_is_canceled_at_once(kind: str, reason: str, home: Path, loaded: LoadedJob) -> None:
    layout = Layout(home)
    job = prepared(layout, loaded, kind)
    index = JobIndex(layout.db_path)
    record = index.get(job.name)
    assert record.backend_id is None and record.status == JobStatus.STARTING
    backend = backend_for(kind)
    assert backend.observe(record, layout, job.target) is None  # nothing to ask an engine about
    backend.cancel(record, layout, job.target)
    # Recorded at once: nothing for the orchestrator to wait for.
    canceled = index.get(job.name)
    assert (canceled.status, canceled.reason) == (JobStatus.CANCELED, reason)
    assert canceled.terminal and canceled.ended_at is not None and canceled.backend_id is None


@pytest.mark.parametrize("kind", [kind for kind in ENGINES if kind != "local"])
def test_a_job_keeps_its_target_as_it_was_when_submitted(kind: str, home: Path, loaded: LoadedJob) -> None:
    """config.yaml's target replaced by another engine's, then removed: the job still names its own."""
    layout = Layout(home)
    job = prepared(layout, loaded, kind)
    name, settings = TARGETS[kind]
    other = "ray" if kind != "ray" else "slurm"
    add_target(layout.config_path, name, other, TARGETS[other][1])
    record = JobIndex(layout.db_path).get(job.name)
    assert record.target == {"type": kind, "settings": settings}
    assert submitted_target(record, layout.config_path) == ComputeTarget(name, kind, settings)
    layout.config_path.write_text("compute: {}\n")
    assert submitted_target(record, layout.config_path) == ComputeTarget(name, kind, settings)
    assert backend_for(submitted_target(record, layout.config_path).type).kind == kind
    # A record from before distrun kept the target has only its name: config.yaml says, as it did.
    add_target(layout.config_path, name, other, TARGETS[other][1])
    older = replace(record, target=None)
    assert submitted_target(older, layout.config_path).type == other


@pytest.mark.parametrize("kind", ["slurm", "kubernetes"])
@pytest.mark.parametrize("call", ["observe", "cancel"])
def test_an_engine_asks_the_target_it_is_handed_and_never_looks_it_up_again(
    kind: str, call: str, home: Path, loaded: LoadedJob
) -> None:
    """The orchestrator looks a job's target up once and hands it to `observe` and `cancel`: a
    handed target with settings the engine refuses is the one it complains about, though the
    record's own target and config.yaml's are fine."""
    layout = Layout(home)
    job = prepared(layout, loaded, kind)
    index = JobIndex(layout.db_path)
    index.update(job.name, status=JobStatus.QUEUED, backend_id="42")
    record = index.get(job.name)
    handed = ComputeTarget("handed", kind, {"no_such_setting": "1"})
    with pytest.raises(DistrunError) as raised:
        getattr(backend_for(kind), call)(record, layout, handed)
    assert "'handed'" in raised.value.message and "no_such_setting" in raised.value.message


# ---------------------------------------------------------------- 4. engine states -> JobStatus


def slurm_status(state: str, index: JobIndex) -> tuple[JobStatus, bool]:
    status = distrun_status(None if state == "(no answer)" else state)
    return status, status.terminal


# Pods of a 2-worker job as the Kubernetes API shows them, and whether the user canceled it.
K8S_PODS: dict[str, tuple[list[PodView], bool]] = {
    "no pod created yet": ([], False),
    "pods Pending": ([pod("w0", "Pending"), pod("w1", "Pending")], False),
    "a pod unschedulable": (
        [pod("w0", "Pending", unschedulable="Unschedulable: 0/3 nodes"), pod("w1", "Running")],
        False,
    ),
    "pods Running": ([pod("w0", "Running"), pod("w1", "Running")], False),
    "every pod Succeeded": ([pod("w0", "Succeeded"), pod("w1", "Succeeded")], False),
    "a pod Failed, the other Succeeded": ([pod("w0", "Failed", exit_code=1), pod("w1", "Succeeded")], False),
    "a pod Failed, the other Running": ([pod("w0", "Failed", exit_code=1), pod("w1", "Running")], False),
    "a pod cannot pull its image": (
        [pod("w0", "Pending", waiting_reason="ImagePullBackOff"), pod("w1", "Pending")],
        False,
    ),
    "canceled, a pod Running": ([pod("w0", "Running")], True),
    "canceled, no pod left": ([], True),
}


def kubernetes_status(state: str, index: JobIndex) -> tuple[JobStatus, bool]:
    pods, canceled = K8S_PODS[state]
    seen = job_state(POD_LAYOUT, pods, {}, canceled=canceled)
    status = JobStatus.of(seen.status)
    # Decided while pods still run: distrun stops them, and the job ends once they are gone.
    assert seen.stop_the_rest == (status.terminal and not seen.terminal)
    return status, seen.terminal


RANK_0_STOPPED = {
    "status": "Canceled",
    "reason": "canceled (SIGTERM)",
    "processes": [{"name": "rank_0", "node_rank": 0, "rank": 0, "log": "/n0/std_log_process_00.txt"}],
}
# The nodes' outcomes the Ray driver collects, and the signal that canceled the driver, if any.
RAY_ENDS: dict[str, tuple[list[dict[str, Any]], int | None]] = {
    "every node Completed": ([{"status": "Completed", "processes": []}] * 2, None),
    "a node Failed, the other stopped": (
        [RANK_0_STOPPED, {"status": "Failed", "reason": "rank 3 failed", "failed_at": 10.0, "processes": []}],
        None,
    ),
    "a node stopped from outside": ([RANK_0_STOPPED, {"status": "Completed", "processes": []}], None),
    "the driver canceled on SIGTERM": ([RANK_0_STOPPED], signal.SIGTERM),
}


def supervised(index: JobIndex, compute: str, launcher_pid: int) -> str:
    """A Running job of local compute or Ray, whose supervisor (the launcher or driver) is `launcher_pid`."""
    index.insert(
        JobRecord(
            name=NAME,
            status=JobStatus.RUNNING,
            compute=compute,
            folder="/jobs/x",
            created_at=1.0,
            launcher_pid=launcher_pid,
            launcher_host=socket.gethostname(),
            launcher_started=process_start_time(launcher_pid),
        )
    )
    return NAME


def supervisor_status(compute: str, state: str, index: JobIndex) -> JobStatus:
    alive = state == "supervisor alive"
    name = supervised(index, compute, os.getpid() if alive else unborn_pid())
    return index.get(name).status


def ray_status(state: str, index: JobIndex) -> tuple[JobStatus, bool]:
    if state.startswith("supervisor"):
        status = supervisor_status("rc", state, index)
    else:
        outcomes, canceled_by = RAY_ENDS[state]
        record_end(index, supervised(index, "rc", os.getpid()), merged_end(outcomes, canceled_by, "/u"))
        status = index.get(NAME).status
    return status, status.terminal


def local_status(state: str, index: JobIndex) -> tuple[JobStatus, bool]:
    if state.startswith("supervisor"):
        status = supervisor_status("local", state, index)
    else:
        ended = JobStatus(state.removeprefix("the gang ended "))
        record_result(index, supervised(index, "local", os.getpid()), GangResult(ended, "why", None))
        status = index.get(NAME).status
    return status, status.terminal


MAPPINGS: dict[str, Callable[[str, JobIndex], tuple[JobStatus, bool]]] = {
    "slurm": slurm_status,
    "kubernetes": kubernetes_status,
    "ray": ray_status,
    "local": local_status,
}
Q, S, R, FIN = JobStatus.QUEUED, JobStatus.STARTING, JobStatus.RUNNING, JobStatus.FINALIZING
OK, FAIL, CANCEL = JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELED
# (engine, its state, distrun's status, whether the job is over)
STATES: list[tuple[str, str, JobStatus, bool]] = [
    *[("slurm", word, Q, False) for word in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")],
    ("slurm", "CONFIGURING", S, False),
    *[("slurm", word, R, False) for word in ("RUNNING", "RESIZING", "SIGNALING")],
    *[("slurm", word, FIN, False) for word in ("STAGE_OUT", "COMPLETING")],
    *[("slurm", word, JobStatus.PAUSED, False) for word in ("SUSPENDED", "STOPPED")],
    ("slurm", "COMPLETED", OK, True),
    *[("slurm", word, CANCEL, True) for word in ("CANCELLED", "CANCELLED by 0", "REVOKED")],
    *[
        ("slurm", word, FAIL, True)
        for word in (
            "FAILED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "BOOT_FAIL",
            "DEADLINE",
            "PREEMPTED",
            "SPECIAL_EXIT",
        )
    ],
    ("slurm", "(no answer)", JobStatus.UNKNOWN, False),  # aged out, or scontrol did not answer
    ("slurm", "NOT_A_SLURM_STATE", JobStatus.UNKNOWN, False),
    ("kubernetes", "no pod created yet", Q, False),
    ("kubernetes", "pods Pending", Q, False),
    ("kubernetes", "a pod unschedulable", Q, False),
    ("kubernetes", "pods Running", R, False),
    ("kubernetes", "every pod Succeeded", OK, True),
    ("kubernetes", "a pod Failed, the other Succeeded", FAIL, True),
    ("kubernetes", "a pod Failed, the other Running", FAIL, False),  # the gang is stopped first
    ("kubernetes", "a pod cannot pull its image", FAIL, False),
    ("kubernetes", "canceled, a pod Running", CANCEL, False),
    ("kubernetes", "canceled, no pod left", CANCEL, True),
    ("ray", "every node Completed", OK, True),
    ("ray", "a node Failed, the other stopped", FAIL, True),
    ("ray", "a node stopped from outside", CANCEL, True),
    ("ray", "the driver canceled on SIGTERM", CANCEL, True),
    ("ray", "supervisor alive", R, False),
    ("ray", "supervisor gone", FAIL, True),  # launcher lost
    *[("local", f"the gang ended {status.value}", status, True) for status in (OK, FAIL, CANCEL, JobStatus.PREEMPTED)],
    ("local", "supervisor alive", R, False),
    ("local", "supervisor gone", FAIL, True),  # launcher lost
]


@pytest.fixture
def index(distrun_home: Path) -> JobIndex:
    distrun_home.mkdir(parents=True)
    return JobIndex(distrun_home / "jobs.db")


@pytest.mark.parametrize(("kind", "state", "status", "over"), STATES, ids=[f"{k}-{s}" for k, s, _, _ in STATES])
def test_each_engine_state_maps_to_a_distrun_status(
    kind: str, state: str, status: JobStatus, over: bool, index: JobIndex
) -> None:
    mapped, terminal = MAPPINGS[kind](state, index)
    assert mapped == status
    assert terminal == over
    assert mapped.terminal or not terminal  # a job is over only in a terminal status


def test_the_table_has_every_state_word_slurm_is_mapped_from() -> None:
    assert set(SLURM_STATES) <= {state for kind, state, _, _ in STATES if kind == "slurm"}


# ---------------------------------------------------------------- 5. settings errors


@pytest.mark.parametrize(
    ("kind", "wrong", "says", "model", "hint"),
    [
        pytest.param(
            "local",
            {"partiton": "debug", "gpus": 2},
            ("local compute takes no settings (got partiton, gpus)",),
            None,  # there are no keys to mean
            "leave them out; local compute runs on this machine",
            id="local",
        ),
        pytest.param(
            "slurm",
            {"partiton": "debug", "cpus_per_node": 0},
            ("unknown setting 'partiton' (did you mean 'partition'?)", "cpus_per_node: "),
            SlurmSettings,
            None,
            id="slurm",
        ),
        pytest.param(
            "ray",
            {"address": "10.0.0.5", "placement_timout": 5},
            ("unknown setting 'placement_timout' (did you mean 'placement_timeout'?)", "not a Ray address"),
            RaySettings,
            None,
            id="ray",
        ),
        pytest.param(
            "kubernetes",
            {"namespce": "ml", "namespace": "Not_A_Label"},
            ("unknown setting 'namespce' (did you mean 'namespace'?)", "namespace: "),
            KubernetesSettings,
            None,
            id="kubernetes",
        ),
    ],
)
def test_wrong_settings_name_the_target_each_key_a_close_key_and_the_known_keys(
    kind: str,
    wrong: dict[str, Any],
    says: tuple[str, ...],
    model: type[BaseModel] | None,
    hint: str | None,
    distrun_home: Path,
) -> None:
    name, settings = TARGETS[kind]
    backend = backend_for(kind)
    assert backend.validate_settings(name, settings) is None
    with pytest.raises(DistrunError) as caught:
        backend.validate_settings(name, {**settings, **wrong})
    message, given = caught.value.message, caught.value.hint or ""
    assert message.startswith(f"compute target {name!r} ({kind}): "), message
    for text in says:  # every mistake, in one error
        assert text in message
    if model is None:
        assert given == hint
    else:
        listed = given.removeprefix(f"settings of a {kind} target: ")
        assert listed != given and set(listed.split(", ")) == set(model.model_fields) - {"name", "type"}
    assert not distrun_home.exists()  # pure: nothing written, not even DISTRUN_HOME
