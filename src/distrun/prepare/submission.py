"""Turning a validated job into a recorded, prepared job: the steps every backend shares.

Order matters for a true record: the row is inserted first (Queued), then the job folder
is filled (resolved job, code snapshot, inputs, output folders); if any of that fails the
row says Failed with the reason, and nothing has started. The row names the process doing
this as the job's supervisor from the start, so if it is killed (SIGKILL) before it hands
the job on, the first reader records the job as launcher lost instead of Queued forever;
Ctrl-C, SIGTERM (`job cancel`) or SIGHUP while preparing record it as Canceled.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, copied_mode, make_dirs, write_file
from distrun.core.job_kind import JobKind
from distrun.core.safe_files import read_text
from distrun.core.user_paths import current_folder
from distrun.loading.loader import LoadedJob, local_path
from distrun.loading.parallel_step import runs_as
from distrun.plan.model import Bindings
from distrun.prepare.compute import ComputeTarget, resolve_target, shares_job_folders, submitted_target
from distrun.prepare.timeouts import spec_timeouts
from distrun.spec import models
from distrun.spec.command_template import render_value
from distrun.store.index import CANCELED, FAILED, QUEUED, STARTING, JobIndex, JobRecord, process_start_time
from distrun.store.layout import JobFolder, Layout
from distrun.store.snapshot import refuse_special_file, snapshot_code

_ADJECTIVES = (
    "amber",
    "brave",
    "calm",
    "eager",
    "gentle",
    "keen",
    "lucid",
    "mellow",
    "quick",
    "sharp",
    "tidy",
    "witty",
)
_NOUNS = (
    "lemon",
    "otter",
    "falcon",
    "maple",
    "comet",
    "pebble",
    "cedar",
    "lynx",
    "harbor",
    "willow",
    "ember",
    "quartz",
)
COPY_MODES = ("download", "eval_download")


class JobCanceledError(DistrunError):
    """`job cancel` reached the job before it started: exit as a canceled run does."""

    exit_code = 130


@dataclass(frozen=True)
class PreparedJob:
    name: str
    spec: models.JobSpec
    folder: JobFolder
    target: ComputeTarget
    bindings: Bindings


def generate_name() -> str:
    return f"{secrets.choice(_ADJECTIVES)}_{secrets.choice(_NOUNS)}_{secrets.token_hex(4)}"


def choose_target(loaded: LoadedJob, layout: Layout, compute: str | None) -> ComputeTarget:
    # The seed form's `infrastructure: k8s` is checked against the job's own target, not --compute's.
    infrastructure = None if compute else loaded.spec.properties.get("compute_infrastructure")
    return resolve_target(compute or loaded.spec.compute, layout.config_path, infrastructure)


def prepare_job(loaded: LoadedJob, layout: Layout, target: ComputeTarget, name: str | None = None) -> PreparedJob:
    spec = loaded.spec
    if name:
        _check_name(name)
        spec = spec.model_copy(update={"name": name})
    job_name = spec.name or generate_name()
    folder = layout.job(job_name)
    index = JobIndex(layout.db_path)
    record = JobRecord(
        name=job_name,
        status=QUEUED,
        compute=target.name,
        folder=str(folder.root),
        created_at=time.time(),
        display_name=spec.display_name or job_name,
        experiment_name=spec.experiment_name or current_folder().name,
        distribution=spec.distribution_type,
        tags=dict(spec.tags),
        launcher_pid=os.getpid(),
        launcher_host=socket.gethostname(),
        launcher_started=process_start_time(os.getpid()),
        target=target.stored(),
        timeouts=spec_timeouts(spec),
        kind=runs_as(spec.command) if loaded.kind is JobKind.COMMAND else loaded.kind,
    )
    if folder.root.exists():
        raise DistrunError(f"a job folder for {job_name!r} already exists at {folder.root}", "choose another name")
    with interrupts_raised():
        index.insert(record)
        try:
            bindings = _fill_folder(loaded, spec, folder, ships_files=not shares_job_folders(target.type))
            bindings = _with_tracking(bindings, folder, layout, target, job_name, record.experiment_name or job_name)
            _write_text(folder.bindings_json, json.dumps(bindings.__dict__, indent=2))
            if not index.update(job_name, status=STARTING):
                raise JobCanceledError(f"job {job_name} was canceled while it was being prepared")
        except KeyboardInterrupt:
            index.update(
                job_name, status=CANCELED, reason="canceled while the job was being prepared", ended_at=time.time()
            )
            raise
        except (OSError, DistrunError) as exc:
            reason = exc.message if isinstance(exc, DistrunError) else f"could not prepare the job folder: {exc}"
            index.update(job_name, status=FAILED, reason=reason, ended_at=time.time())
            if isinstance(exc, DistrunError):
                raise
            raise DistrunError(reason, "check free space and permissions under DISTRUN_HOME") from None
    return PreparedJob(job_name, spec.model_copy(update={"name": job_name}), folder, target, bindings)


def _check_name(name: str) -> None:
    """`--name` comes from the command line, not the file: the file's rule, distrun's error."""
    import re

    if not re.fullmatch(models.JOB_NAME_PATTERN, name):
        raise DistrunError(
            f"--name: job name {name!r} is not allowed: it names a folder, so it may hold only letters, digits, "
            "'_', '.' and '-', must start with a letter or digit, and be at most 255 characters",
            "e.g. --name mnist_ddp-2",
        )


@contextmanager
def interrupts_raised() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does, so the record can say so."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _fill_folder(loaded: LoadedJob, spec: models.JobSpec, folder: JobFolder, ships_files: bool) -> Bindings:
    make_dirs(folder.root.parent)
    folder.root.mkdir(mode=DIR_MODE)  # not exist_ok: two jobs never share a folder
    for path in (folder.user_logs, folder.system_logs, folder.named_outputs):
        path.mkdir(mode=DIR_MODE)
    resolved = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    resolved["name"] = folder.root.name
    _write_text(folder.job_json, json.dumps(resolved, indent=2))
    _write_yaml(folder.job_yaml, resolved)
    if spec.code is not None:
        code = local_path(loaded, spec.code)
        assert code is not None  # the loader checked it
        # DISTRUN_HOME (so this job's own folder) may be inside the code folder: never copied.
        snapshot_code(code, folder.code, skip=(folder.root.parent.parent,))
    else:
        folder.code.mkdir(mode=DIR_MODE)
    return bind(loaded, spec, folder, materialize=True, ships_files=ships_files)


def _with_tracking(
    bindings: Bindings, folder: JobFolder, layout: Layout, target: ComputeTarget, name: str, experiment: str
) -> Bindings:
    """The job's MLflow run, created before any process starts; its variables go to every process."""
    from distrun.metrics.tracking import start_run

    run = start_run(folder, layout.home, name, experiment, target.settings.get("tracking_uri"))
    if run is None:
        return bindings
    return Bindings(**{**bindings.__dict__, "environment": {**bindings.environment, **run.environment()}})


def bind(
    loaded: LoadedJob, spec: models.JobSpec, folder: JobFolder, materialize: bool, ships_files: bool = False
) -> Bindings:
    """What each input and output reference becomes; `materialize` copies and creates them.

    `ships_files`: the job's nodes do not see this machine's job folders (Ray, Kubernetes); an
    input that is another job's output (a pipeline's upstream step) is then copied into this
    job's `inputs/`, which the backend ships with the code, as a `mode: download` input is.
    """
    inputs: dict[str, str] = {}
    input_paths: dict[str, str] = {}
    input_sources: dict[str, dict[str, str]] = {}
    jobs = folder.root.parent.resolve()
    registered_models = (jobs.parent / "models").resolve()  # distrun.data.model_versions.models_dir
    for name, value in spec.inputs.items():
        if isinstance(value, models.DataInput):
            source, how = _input_source(loaded, value, folder, materialize)
            input_sources[name] = {"path": value.path, "source": how}
            shipped = ships_files and (source.is_relative_to(jobs) or source.is_relative_to(registered_models))
            if shipped:
                input_sources[name]["source"] = f"{how}, copied into the job folder to travel with it"
            if value.mode in COPY_MODES or shipped:
                target = folder.inside(folder.inputs / name)
                if source.is_file():
                    target = target / source.name
                if materialize:
                    _copy_input(source, target)
                source = target
            inputs[name] = input_paths[name] = str(source)
        elif isinstance(value, models.LiteralInput):
            given = value.value if value.value is not None else value.default
            if given is not None:
                inputs[name] = render_value(given)
        else:
            inputs[name] = render_value(value)
    outputs: dict[str, str] = {}
    for name, out in spec.outputs.items():
        elsewhere = _output_elsewhere(out, name, folder, materialize)
        if elsewhere is not None:
            outputs[name] = elsewhere
            continue
        path = folder.named_output(name)
        if materialize:
            make_dirs(path)
        outputs[name] = str(path / name) if out is not None and out.type == "uri_file" else str(path)
    variables, layer, image_build = _rank_python(loaded, spec, folder, materialize, image_builds=not ships_files)
    return Bindings(
        inputs=inputs,
        outputs=outputs,
        input_paths=input_paths,
        input_sources=input_sources,
        environment=variables,
        python_layer=layer,
        image_build=image_build,
    )


def _input_source(loaded: LoadedJob, value: models.DataInput, folder: JobFolder, materialize: bool) -> tuple[Path, str]:
    """A data input's local path (datastores, assets, job outputs and URL mirrors resolved, URLs
    fetched) and, in a few words, where its data comes from."""
    from distrun.data.locations import fetch_input, input_location

    home = folder.root.parent.parent  # $DISTRUN_HOME/jobs/<name>
    location = input_location(value.path, loaded.base_dir, home, kind=value.type)
    return fetch_input(location, home, value.type != "uri_folder", materialize).resolve(), location.source()


def _output_elsewhere(out: models.OutputSpec | None, name: str, folder: JobFolder, materialize: bool) -> str | None:
    """An output with a datastore `path` is written there (and registered when it is named)."""
    from distrun.data.outputs import bind_output

    return bind_output(out, name, folder.root.name, folder.root.parent.parent, materialize)


def _rank_python(
    loaded: LoadedJob, spec: models.JobSpec, folder: JobFolder, materialize: bool, image_builds: bool
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The ranks' variables for the job's environment, its layer (`Bindings.python_layer`), and an
    image built from its build context where the job's compute runs containers (`image_builds`)."""
    if spec.environment is None:  # distrun's own Python, under a layer of the job's own (its pip installs there)
        if not image_builds:  # nodes that do not see this machine's files (Ray, Kubernetes) run their own Python
            return {}, {}, {}
        from distrun.environments.own_layer import own_layer

        variables, layer = own_layer(folder.python_layer, materialize)
        return variables, layer, {}
    from distrun.environments.resolve import job_python

    home = folder.root.parent.parent  # $DISTRUN_HOME/jobs/<name>
    found = job_python(
        spec.environment, loaded.base_dir, home, loaded.position, materialize, folder.python_layer, image_builds
    )
    if image_builds and found.in_own_python:
        # A curated name or an image that runs without a container (no engine here, containers
        # switched off): distrun's own Python, so the job's own layer over it, as with no environment.
        from distrun.environments.container_image import runs_in_container

        if not runs_in_container(spec, home / "config.yaml"):
            from distrun.environments.own_layer import own_layer

            variables, layer = own_layer(folder.python_layer, materialize)
            return variables, layer, {}
    return found.variables, found.layer, found.image_build


def _copy_input(source: Path, target: Path) -> None:
    if source.is_dir():
        make_dirs(target.parent)
        shutil.copytree(source, target, symlinks=True, copy_function=_copy_file)
        for folder, _, _ in os.walk(target):
            os.chmod(folder, copied_mode(os.stat(folder).st_mode))
    else:
        make_dirs(target.parent)
        _copy_file(source, target)


def _copy_file(source: Path | str, target: Path | str) -> None:
    refuse_special_file(Path(source), "input")
    shutil.copy2(source, target, follow_symlinks=False)
    if not os.path.islink(target):
        os.chmod(target, copied_mode(os.stat(target).st_mode))


def load_bindings(folder: JobFolder) -> Bindings:
    return Bindings(**json.loads(read_text(folder.bindings_json, root=folder.root)))


def load_prepared(layout: Layout, name: str) -> PreparedJob:
    """A prepared job read back from its folder (for a detached or remote launcher)."""
    folder = layout.job(name)
    spec = models.JobSpec.model_validate(json.loads(read_text(folder.job_json, root=folder.root)))
    record = JobIndex(layout.db_path).get(name)
    target = submitted_target(record, layout.config_path)
    return PreparedJob(name, spec, folder, target, load_bindings(folder))


def _write_text(path: Path, text: str) -> None:
    write_file(path, text.encode("utf-8"))


def _write_yaml(path: Path, data: dict[str, object]) -> None:
    from io import StringIO

    from ruamel.yaml import YAML

    buffer = StringIO()
    YAML().dump(data, buffer)
    _write_text(path, buffer.getvalue())
