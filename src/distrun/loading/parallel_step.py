"""A pipeline's `type: parallel` step as the command job it runs as.

A parallel step is a gang: `resources.instance_count` nodes x `max_concurrency_per_instance`
processes (a `type: pytorch` distribution with that many processes per node), each of them
distrun's parallel worker (`python -m distrun.agent.parallel_run`), which pulls mini-batches
of the step's `input_data` from a queue in the job's folder and runs the task's entry script
over them (docs/parallel.md). So a parallel step is held to the standards of a command step
(its inputs, outputs, code, environment, compute), and runs on every backend a command runs on.

A step naming a parallel component file (`type: parallel` component) takes the component's
keys under its own, as a command step does. Everything is checked before anything runs.
"""

from __future__ import annotations

import copy
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.core.errors import ValidationError
from distrun.core.job_kind import JobKind
from distrun.spec.parallel_settings import PARALLEL_KEYS, ParallelSettings, parallel_settings
from distrun.spec.pipeline_models import DATA_TYPES
from distrun.spec.pipeline_paths import absolute, absolute_environment
from distrun.spec.pipeline_steps import copy_positions
from distrun.spec.source_map import KeyPath, SourceMap
from distrun.spec.yaml_source import read_yaml_file

ProblemAt = Callable[[str, KeyPath, str], None]

WORKER_MODULE = "distrun.agent.parallel_run"
# What a parallel component file may hold besides the parallel keys.
COMPONENT_KEYS = (
    "$schema",
    "type",
    "name",
    "version",
    "display_name",
    "description",
    "tags",
    "is_deterministic",
    "inputs",
    "outputs",
    "resources",
    "environment_variables",
    *PARALLEL_KEYS,
)
# What a command step takes of a parallel step as written.
COMMAND_KEYS = (
    "compute",
    "inputs",
    "outputs",
    "display_name",
    "description",
    "tags",
    "resources",
    "environment_variables",
    "experiment_name",
    "identity",
    "properties",
    "limits",  # distrun's timeout, max_restarts and hang_timeout, as a command step's
)


def is_parallel_step(raw: Any) -> bool:
    return isinstance(raw, dict) and str(raw.get("type", "")).lower() == "parallel"


def parallel_steps_as_commands(
    jobs: dict[str, Any],
    problem_at: Callable[[str, KeyPath, str], None],
    smap: SourceMap,
    base_dir: Path,
    notes: list[str],
) -> dict[str, Any]:
    """`jobs` with each parallel step replaced by its command step (or by None when it is refused:
    its problems are said through `problem_at(message, full key path, hint)`); what distrun
    accepts without honouring is added to `notes`."""
    result = dict(jobs)
    for name, raw in jobs.items():
        if not is_parallel_step(raw):
            continue
        at: KeyPath = ("jobs", str(name))

        def problem(message: str, key: KeyPath, hint: str, at: KeyPath = at) -> None:
            problem_at(message, at + key, hint)

        merged, component_dir = _with_component(raw, problem, smap, base_dir, at)
        built = None if merged is None else command_step(merged, problem, smap, at, component_dir or base_dir)
        result[name] = built[0] if built else None
        if built and built[1].ignored_arguments:
            notes.append(
                f"{smap.find(at + ('task', 'program_arguments'))}: step {name!r}: "
                f"{', '.join(built[1].ignored_arguments)} tune Azure ML's own parallel runtime; distrun's has no "
                "such setting and passes them to the entry script only"
            )
    return result


def _with_component(
    raw: dict[str, Any], problem: ProblemAt, smap: SourceMap, base_dir: Path, at: KeyPath
) -> tuple[dict[str, Any] | None, Path | None]:
    """The step's keys over its parallel component's (a file it names), and the component's folder."""
    ref = raw.get("component")
    if ref is None:
        return raw, None
    if isinstance(ref, dict):  # an inline parallel component (the SDK's parallel_run_function writes one)
        inline = SourceMap(smap.source)
        copy_positions(smap, at + ("component",), inline, ())
        return _merged(raw, ref, inline, smap, at, problem, "the inline component"), base_dir
    if not isinstance(ref, str):
        problem(
            "a parallel step names its parallel component as a file or azureml:NAME:VERSION",
            ("component",),
            "write `component: ./score.yml`, or write the task inline",
        )
        return None, None
    path = (
        _registered_file(ref, problem)
        if ref.startswith("azureml:")
        else Path(absolute(ref.removeprefix("file:"), base_dir))
    )
    if path is None:
        return None, None
    try:
        data, component_map = read_yaml_file(path)
    except ValidationError as exc:
        for found in exc.problems:
            problem(f"component {ref}: {found.message}", ("component",), found.hint)
        return None, None
    merged = _merged(raw, data, component_map, smap, at, problem, f"component {ref}")
    return merged, path.parent if merged is not None else None


def _registered_file(ref: str, problem: ProblemAt) -> Path | None:
    """The file of a parallel component registered with `distrun component create` (its code
    folder copied in beside it)."""
    from distrun.core.errors import DistrunError
    from distrun.loading.component_reader import registered_file

    try:
        return registered_file(ref)
    except DistrunError as exc:
        problem(exc.message, ("component",), exc.hint)
        return None


def check_component_file(path: Path) -> dict[str, Any]:
    """A parallel component file on its own (`distrun component create`), checked as a step
    naming it is: its keys, its task (its entry script in its code folder) and its settings.
    Its data; a `ValidationError` naming each problem at its file, line and key."""
    data, component_map = read_yaml_file(path)
    _check_component(data, str(path), component_map, SourceMap(str(path)), path.parent)
    return data  # type: ignore[no-any-return]


def check_component_data(data: dict[str, Any], base_dir: Path, source: str) -> None:
    """A parallel component made in Python (`parallel_run_function`, registered with
    `ml_client.components.create_or_update`), checked as a file is; its problems name `source`."""
    _check_component(data, data, SourceMap(source), SourceMap(source), base_dir)


def _check_component(data: Any, ref: Any, component_map: SourceMap, smap: SourceMap, base_dir: Path) -> None:
    from distrun.core.errors import Problem

    problems: list[Problem] = []

    def problem(message: str, key: KeyPath, hint: str) -> None:
        at = ".".join(str(k) for k in key if k != "component")
        problems.append(Problem(message, at, component_map.find(tuple(k for k in key if k != "component")), hint))

    declared = data.get("inputs") if isinstance(data, dict) and isinstance(data.get("inputs"), dict) else {}
    # Each input as a step would give it (a path for data): a step's values are checked when it runs.
    given = {name: "." for name, declaration in declared.items() if not _has_default(declaration)}
    merged, folder = _with_component({"component": ref, "inputs": given}, problem, smap, base_dir, ())
    if merged is not None and folder is not None:
        command_step(merged, problem, smap, (), folder)
    if problems:
        raise ValidationError(problems)


def _has_default(declaration: Any) -> bool:
    return isinstance(declaration, dict) and "default" in declaration


def _merged(
    raw: dict[str, Any],
    data: Any,
    component_map: SourceMap,
    smap: SourceMap,
    at: KeyPath,
    problem: ProblemAt,
    what: str,
) -> dict[str, Any] | None:
    if not isinstance(data, dict) or str(data.get("type", "")).lower() != "parallel":
        problem(
            f"{what} is not a parallel component (`type: parallel`)",
            ("component",),
            "a parallel step names a `type: parallel` component, or writes its task inline",
        )
        return None
    for key in data:
        if key not in COMPONENT_KEYS:
            where = component_map.find((key,))
            problem(f"unknown key {key!r} in parallel component {where}", ("component",), ", ".join(COMPONENT_KEYS))
    merged = {k: copy.deepcopy(v) for k, v in data.items() if k not in ("$schema", "name", "version", "type")}
    for key in merged:
        if key not in raw:
            copy_positions(component_map, (key,), smap, at + (key,))
    merged["inputs"] = _step_inputs(data.get("inputs"), raw.get("inputs"))
    merged["outputs"] = _step_outputs(data.get("outputs"), raw.get("outputs"))
    merged.update({k: v for k, v in raw.items() if k not in ("component", "inputs", "outputs")})
    return merged


def _step_inputs(declared: Any, given: Any) -> dict[str, Any]:
    """The component's input declarations with the step's values: a data input as {type, path}."""
    given = dict(given) if isinstance(given, dict) else {}
    result: dict[str, Any] = {}
    for name, declaration in (declared or {}).items():
        kind = declaration.get("type") if isinstance(declaration, dict) else None
        value = given.pop(name, None)
        if value is None and isinstance(declaration, dict) and "default" in declaration:
            value = declaration["default"]
        if value is None:
            continue
        if kind in DATA_TYPES and not isinstance(value, dict):
            value = {"type": kind, "path": value}
        elif kind in DATA_TYPES and isinstance(value, dict) and "type" not in value:
            value = {"type": kind, **value}
        result[name] = value
    return {**result, **given}


def _step_outputs(declared: Any, given: Any) -> dict[str, Any]:
    given = dict(given) if isinstance(given, dict) else {}
    result: dict[str, Any] = {}
    for name, declaration in (declared or {}).items():
        value = given.pop(name, None)
        kind = declaration.get("type", "uri_folder") if isinstance(declaration, dict) else "uri_folder"
        if isinstance(value, str):  # a binding: `${{parent.outputs.x}}`
            result[name] = value
        else:
            result[name] = {"type": kind, **value} if isinstance(value, dict) else {"type": kind}
    return {**result, **given}


def input_types(inputs: Any) -> dict[str, str]:
    """Each step input's type ("" when written as a bare value or binding)."""
    if not isinstance(inputs, dict):
        return {}
    return {str(n): str(v.get("type", "")) if isinstance(v, dict) else "" for n, v in inputs.items()}


def command_step(
    raw: dict[str, Any], problem: ProblemAt, smap: SourceMap, at: KeyPath, base_dir: Path
) -> tuple[dict[str, Any], ParallelSettings] | None:
    """The command step a parallel step runs as and its settings, or None when it is refused."""
    for key in raw:
        if key not in (*COMMAND_KEYS, *PARALLEL_KEYS, "type", "component", "is_deterministic"):
            problem(
                f"a parallel step does not take `{key}`",
                (key,),
                "a parallel step takes " + ", ".join((*PARALLEL_KEYS, *COMMAND_KEYS)),
            )
    settings = parallel_settings(raw, input_types(raw.get("inputs")), problem)
    if settings is None:
        return None
    task = raw["task"]
    code = task.get("code")
    if not isinstance(code, str) or not code.strip():
        problem("a parallel task names its `code`: the folder of its entry script", ("task",), "add `code: ./src`")
        return None
    code_dir = Path(absolute(code, base_dir))
    if not (code_dir / settings.entry_script).is_file():
        problem(
            f"entry script {settings.entry_script!r} is not a file in {code_dir}",
            ("task", "entry_script"),
            "entry_script is relative to the task's code folder",
        )
        return None
    step = {k: copy.deepcopy(v) for k, v in raw.items() if k in COMMAND_KEYS}
    step.update(
        type="command",
        code=str(code_dir),
        command=worker_command(settings, input_types(raw.get("inputs")).get(settings.input_name, "")),
        distribution={"type": "pytorch", "process_count_per_instance": processes_per_node(settings)},
    )
    if "environment" in task:
        step["environment"] = absolute_environment(copy.deepcopy(task["environment"]), base_dir)
    moves = {"code": ("task", "code"), "environment": ("task", "environment"), "command": ("task",)}
    moves["distribution"] = ("max_concurrency_per_instance",)
    for key, source in moves.items():
        smap.set(at + (key,), smap.find(at + source))
    return step, settings


def runs_as(command: str | None) -> JobKind:
    """The kind a command job's record holds: PARALLEL when its processes are distrun's parallel
    worker (what `worker_command` writes), else COMMAND."""
    return JobKind.PARALLEL if command and f"-m {WORKER_MODULE} " in command else JobKind.COMMAND


def processes_per_node(settings: ParallelSettings) -> int:
    """`max_concurrency_per_instance`, or this machine's cores (Azure ML's default for a CPU node)."""
    return settings.processes_per_node or max(1, os.cpu_count() or 1)


def worker_command(settings: ParallelSettings, input_type: str) -> str:
    """The command each process of the gang runs: distrun's worker, with the step's settings."""
    # distrun's own Python where it is (local compute, Slurm and Ray nodes: the job's environment
    # does not have distrun); elsewhere (a Kubernetes pod) the `python` of the image, which must.
    prefix = f'P={shlex.quote(sys.executable)}; [ -x "$P" ] || P=python; '
    words = [
        '"$P"',
        "-m",
        WORKER_MODULE,
        "--entry-script",
        shlex.quote(settings.entry_script),
        "--input-data",
        f"${{{{inputs.{settings.input_name}}}}}",
        "--input-type",
        input_type or "auto",
        "--max-retries",
        str(settings.max_retries),
        "--timeout",
        str(settings.timeout),
        "--mini-batch-error-threshold",
        str(settings.mini_batch_error_threshold),
        "--error-threshold",
        str(settings.error_threshold),
        "--logging-level",
        settings.logging_level,
    ]
    if settings.files_per_batch is not None:
        words += ["--files-per-batch", str(settings.files_per_batch)]
    if settings.bytes_per_batch is not None:
        words += ["--bytes-per-batch", str(settings.bytes_per_batch)]
    if settings.partition_keys:
        words += ["--partition-keys", shlex.quote(",".join(settings.partition_keys))]
    if settings.allowed_failed_percent is not None:
        words += ["--allowed-failed-percent", str(settings.allowed_failed_percent)]
    if settings.append_row_to is not None:
        words += ["--append-row-to", f"${{{{outputs.{settings.append_row_to}}}}}"]
        words += ["--append-row-file-name", shlex.quote(settings.append_row_file_name)]
    arguments = " ".join(settings.program_arguments.splitlines())  # a folded YAML block is one line
    return prefix + " ".join(words) + " -- " + arguments
