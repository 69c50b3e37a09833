"""`distrun run`'s one runner (`distrun.runner.attach`): what it prints around a job, for each family of backend.

The backends' hooks that would start something (`supervise`, `schedule`, `observe`) are replaced
by stand-ins that record the job as the real ones would; the runner's own part (notes, header,
the stream, the Execution Summary) runs as it does for `distrun run`.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from distrun.backends.engine import EngineBackend
from distrun.backends.registry import BACKENDS, backend_for
from distrun.backends.supervised import SupervisedBackend
from distrun.backends.values import Observation, RenderedJob
from distrun.core.job_status import JobStatus
from distrun.prepare.compute import resolve_target
from distrun.prepare.submission import prepare_job
from distrun.runner.attach import run_attached
from distrun.store.index import JobIndex
from distrun.store.layout import Layout
from support.backend_contract import refuse_engines
from support.job_files import load_text

JOB = """\
command: python train.py
code: src
resources: {instance_count: 2}
distribution: {type: pytorch, process_count_per_instance: 2}
"""
TARGETS = {
    "local": ("local", ""),
    "ray": ("rc", "{type: ray, address: '10.0.0.5:6379'}"),
    "slurm": ("hpc", "{type: slurm, partition: debug}"),
    "kubernetes": ("cluster", "{type: kubernetes, namespace: ml, jobset: always, image: 'reg/distrun:1'}"),
}
RULE = "=" * 60


@pytest.fixture
def layout(distrun_home: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    refuse_engines(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # local compute's GPUs: none, without nvidia-smi
    distrun_home.mkdir(parents=True)
    lines = [f"  {name}: {body}" for name, body in TARGETS.values() if body]
    (distrun_home / "config.yaml").write_text("compute:\n" + "\n".join(lines) + "\n")
    return Layout(distrun_home)


def rendered_job(layout: Layout, tmp_path: Path, kind: str) -> RenderedJob:
    """The job as `distrun run` has it before the runner: recorded, its folder filled, rendered (no preflight:
    it would ask the engine)."""
    (tmp_path / "job").mkdir()
    loaded = load_text(tmp_path / "job", JOB, [f"name=run_{kind}"])
    job = prepare_job(loaded, layout, resolve_target(TARGETS[kind][0], layout.config_path))
    return backend_for(kind).render(job, layout)


def ended(layout: Layout, name: str, **fields: Any) -> None:
    now = time.time()
    JobIndex(layout.db_path).update(
        name, status=JobStatus.COMPLETED, started_at=now - 1.5, ended_at=now, processes=[], **fields
    )


def test_every_backend_is_of_one_family() -> None:
    for kind in BACKENDS:
        backend = backend_for(kind)
        assert isinstance(backend, EngineBackend) != isinstance(backend, SupervisedBackend), kind


@pytest.mark.parametrize("kind", ["local", "ray"])
def test_a_supervised_job_gets_its_notes_and_header_once_planned_then_its_lines_then_the_summary(
    kind: str, layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = rendered_job(layout, tmp_path, kind)
    backend = backend_for(kind)
    assert isinstance(backend, SupervisedBackend)
    finished: list[str] = []

    def supervise(rendered: RenderedJob, layout: Layout, stream: Any, color: bool, on_plan: Any) -> Any:
        on_plan(rendered.plan)
        stream.write(b"[0/0] training\n")
        ended(layout, rendered.job.name)
        return JobIndex(layout.db_path).get(rendered.job.name)

    monkeypatch.setattr(backend, "supervise", supervise)
    monkeypatch.setattr(backend, "finished", lambda rendered, record: finished.append(record.status))
    out = io.BytesIO()
    record = run_attached(backend, rendered, layout, out, color=False)

    assert record.status == JobStatus.COMPLETED and finished == [JobStatus.COMPLETED]
    notes = [f"distrun: {note}" for note in backend.attached_notes(rendered, rendered.plan)]
    if kind == "ray":
        assert notes[-1] == "distrun: placed on Ray compute rc: node 0 <ray node 0>, node 1 <ray node 1>"
    folder = rendered.job.folder.root
    header = [f"RunId: run_{kind}", f"Streaming {folder}/user_logs (4 processes on 2 nodes)", RULE]
    summary = ["", "Execution Summary", RULE, f"RunId: run_{kind}", "Status: Completed"]
    lines = out.getvalue().decode().splitlines()
    assert lines[: len(notes) + 4] == [*notes, *header, "[0/0] training"]
    assert lines[len(notes) + 4 : len(notes) + 9] == summary
    assert lines[-1] == f"Logs: {folder}/user_logs"


@pytest.mark.parametrize(("kind", "engine"), [("slurm", "Slurm"), ("kubernetes", "Kubernetes")])
def test_an_engines_job_is_scheduled_named_with_its_engines_id_followed_and_summarized(
    kind: str, engine: str, layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = rendered_job(layout, tmp_path, kind)
    backend = backend_for(kind)
    assert isinstance(backend, EngineBackend)
    index = JobIndex(layout.db_path)
    name = rendered.job.name

    def schedule(rendered: RenderedJob, layout: Layout) -> Any:
        index.update(name, status=JobStatus.QUEUED, backend_id="42")
        return index.get(name)

    def observe_submitted(record: Any, layout: Layout, target: Any) -> Observation:
        logs = rendered.job.folder.user_logs
        (logs / "std_log_process_00.txt").write_text("training\n")
        return Observation(status=JobStatus.COMPLETED, started_at=time.time() - 1.5)

    monkeypatch.setattr(backend, "schedule", schedule)
    monkeypatch.setattr(backend, "observe_submitted", observe_submitted)
    monkeypatch.setattr(backend, "fetch_logs", lambda record, layout: None)
    out = io.BytesIO()
    record = run_attached(backend, rendered, layout, out, color=False)

    assert record.status == JobStatus.COMPLETED and record.backend_id == "42"
    folder = rendered.job.folder.root
    lines = out.getvalue().decode().splitlines()
    assert lines[:4] == [
        f"RunId: {name}",
        f"Streaming {folder}/user_logs (4 processes on 2 nodes)",
        f"{engine} job 42 on compute {TARGETS[kind][0]}",
        RULE,
    ]
    assert lines[4].endswith("training")  # the rank's line, with its prefix
    assert lines[5:10] == ["", "Execution Summary", RULE, f"RunId: {name}", "Status: Completed"]
