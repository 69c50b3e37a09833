"""A parallel step's own settings (Azure ML's parallelJob schema), checked: its `task`, how its
input is split into mini-batches, its thresholds and retries, and the predefined program
arguments Azure ML's parallel runtime reads (`--error_threshold`, `--allowed_failed_percent`, ...).

Pure: plain data in, a `ParallelSettings` and the problems found out. Each problem is said
through `problem(message, key_path, hint)` with the key path under the step, so it names the
file and line it was written at.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distrun.spec.source_map import KeyPath

ProblemAt = Callable[[str, KeyPath, str], None]

# The keys of a parallel step (or a parallel component) that are a parallel job's own; the
# others (inputs, outputs, compute, resources, environment_variables, ...) are a command job's.
PARALLEL_KEYS = (
    "task",
    "input_data",
    "mini_batch_size",
    "partition_keys",
    "max_concurrency_per_instance",
    "mini_batch_error_threshold",
    "error_threshold",
    "retry_settings",
    "logging_level",
)
TASK_KEYS = ("type", "code", "entry_script", "program_arguments", "environment", "append_row_to")
RETRY_KEYS = ("max_retries", "timeout")
LOGGING_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_MAX_RETRIES = 3  # Azure ML's defaults
DEFAULT_TIMEOUT = 60  # seconds per mini-batch
DEFAULT_FILES_PER_BATCH = 10
DEFAULT_BYTES_PER_BATCH = 1 << 20

# Program arguments Azure ML's parallel runtime reads itself -> what each is (an int, a float).
# Those distrun honours are used; the others are accepted and said to have no effect here.
PREDEFINED = {
    "--error_threshold": int,
    "--mini_batch_error_threshold": int,
    "--allowed_failed_percent": float,
    "--task_overhead_timeout": float,
    "--progress_update_timeout": float,
    "--first_task_creation_timeout": float,
    "--resource_monitor_interval": float,
    "--run_invocation_timeout": float,
    "--run_max_try": int,
    "--process_count_per_node": int,
    "--copy_logs_to_parent": str,
    "--append_row_file_name": str,
}
HONOURED = ("--error_threshold", "--mini_batch_error_threshold", "--allowed_failed_percent", "--append_row_file_name")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
_BINDING = re.compile(r"^\s*\$\{\{\s*(inputs|outputs)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")


@dataclass(frozen=True)
class ParallelSettings:
    """What the parallel runtime needs, as the step wrote it (bindings still `${{...}}`)."""

    entry_script: str
    input_name: str  # the step input `input_data` names
    files_per_batch: int | None  # a count (of files, or of rows for a table)
    bytes_per_batch: int | None  # a size (tables only)
    partition_keys: tuple[str, ...]
    processes_per_node: int | None  # None: the node's cores
    max_retries: int
    timeout: float
    mini_batch_error_threshold: int  # -1: no limit
    error_threshold: int  # failed items; -1: no limit
    allowed_failed_percent: float | None
    logging_level: str
    append_row_to: str | None  # an output name
    append_row_file_name: str
    program_arguments: str
    ignored_arguments: tuple[str, ...]  # predefined arguments distrun accepts without effect


def binding_name(value: Any, kind: str) -> str | None:
    """`${{inputs.x}}` -> "x" when `kind` is "inputs"."""
    found = _BINDING.match(value) if isinstance(value, str) else None
    return found.group(2) if found and found.group(1) == kind else None


def batch_size(value: Any) -> tuple[int | None, int | None] | None:
    """(files, bytes) of a `mini_batch_size`: "10" is a count, "10kb" a size; None when neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, None) if value > 0 else None
    if not isinstance(value, str):
        return None
    if value.strip().isdigit():
        return (int(value), None) if int(value) > 0 else None
    found = _SIZE.match(value)
    if not found:
        return None
    size = int(float(found.group(1)) * _UNITS[found.group(2).lower()])
    return (None, size) if size > 0 else None


class _Reader:
    def __init__(self, raw: dict[str, Any], problem: ProblemAt) -> None:
        self.raw = raw
        self.problem = problem

    def whole(self, key: str, default: int, low: int, *, at: KeyPath | None = None, value: Any = None) -> int:
        found = self.raw.get(key, default) if at is None else value
        where = at or (key,)
        if isinstance(found, str) and re.fullmatch(r"-?\d+", found.strip()):
            found = int(found)
        if isinstance(found, bool) or not isinstance(found, int) or found < low:
            self.problem(f"{where[-1]} must be a whole number >= {low}, not {found!r}", where, f"write e.g. {default}")
            return default
        return found


def parallel_settings(raw: dict[str, Any], input_types: dict[str, str], problem: ProblemAt) -> ParallelSettings | None:
    """The settings of a parallel step `raw` (a component's keys already under the step's), whose
    inputs have the types `input_types` ("" when a step input's type is not written)."""
    read = _Reader(raw, problem)
    task = raw.get("task")
    if not isinstance(task, dict):
        problem(
            "a parallel step needs its `task`: the entry script each process runs",
            ("task",),
            "add `task: {type: run_function, code: ./src, entry_script: score.py}`",
        )
        return None
    entry, append_name, arguments = _task(task, problem)
    input_name = binding_name(raw.get("input_data"), "inputs")
    if input_name is None or input_name not in input_types:
        named = ", ".join(input_types) or "none"
        problem(
            f"input_data must be `${{{{inputs.NAME}}}}` naming one of the step's inputs, not {raw.get('input_data')!r}",
            ("input_data",),
            f"the step's inputs: {named}; write `input_data: ${{{{inputs.{next(iter(input_types), 'data')}}}}}`",
        )
    input_type = input_types.get(input_name or "", "")
    files, size = _split(raw, input_type, problem)
    keys = _partition_keys(raw, input_type, problem)
    retry = raw.get("retry_settings") or {}
    if not isinstance(retry, dict):
        problem("retry_settings must be a mapping", ("retry_settings",), "write `retry_settings: {max_retries: 2}`")
        retry = {}
    for key in retry:
        if key not in RETRY_KEYS:
            problem(f"unknown key {key!r} in retry_settings", ("retry_settings", key), "it takes max_retries, timeout")
    at_retries, at_timeout = ("retry_settings", "max_retries"), ("retry_settings", "timeout")
    max_retries = read.whole("max_retries", DEFAULT_MAX_RETRIES, 0, at=at_retries, value=retry.get("max_retries", 3))
    timeout = read.whole("timeout", DEFAULT_TIMEOUT, 1, at=at_timeout, value=retry.get("timeout", DEFAULT_TIMEOUT))
    level = str(raw.get("logging_level", "INFO")).upper()
    if level not in LOGGING_LEVELS:
        problem(f"logging_level {raw.get('logging_level')!r} is not one", ("logging_level",), ", ".join(LOGGING_LEVELS))
    predefined = _predefined(arguments, problem)
    thresholds = {
        "mini_batch_error_threshold": read.whole("mini_batch_error_threshold", -1, -1),
        "error_threshold": read.whole("error_threshold", -1, -1),
    }
    for key, value in thresholds.items():
        said = predefined.get(f"--{key}")
        if said is not None and key in raw and said != value:
            problem(
                f"{key} is {value} but program_arguments say --{key} {said}",
                ("task", "program_arguments"),
                f"keep one of them: `{key}:` or `--{key}`",
            )
        elif said is not None:
            thresholds[key] = int(said)
    processes = None
    if "max_concurrency_per_instance" in raw:
        processes = read.whole("max_concurrency_per_instance", 1, 1)
    if not isinstance(entry, str) or input_name is None:
        return None
    return ParallelSettings(
        entry_script=entry.strip(),
        input_name=input_name,
        files_per_batch=files,
        bytes_per_batch=size,
        partition_keys=keys,
        processes_per_node=processes,
        max_retries=max_retries,
        timeout=float(timeout),
        mini_batch_error_threshold=thresholds["mini_batch_error_threshold"],
        error_threshold=thresholds["error_threshold"],
        allowed_failed_percent=predefined.get("--allowed_failed_percent"),
        logging_level=level,
        append_row_to=append_name,
        append_row_file_name=str(predefined.get("--append_row_file_name") or "parallel_run_step.txt"),
        program_arguments=arguments,
        ignored_arguments=tuple(sorted(k for k in predefined if k not in HONOURED)),
    )


def _task(task: dict[str, Any], problem: ProblemAt) -> tuple[Any, str | None, str]:
    """The task's entry script, the output `append_row_to` names, and its program arguments."""
    for key in task:
        if key not in TASK_KEYS:
            problem(f"unknown key {key!r} in a parallel task", ("task", key), "a task takes " + ", ".join(TASK_KEYS))
    if str(task.get("type", "run_function")) != "run_function":
        problem(
            f"task type {task.get('type')!r} is not run by distrun",
            ("task", "type"),
            "write `type: run_function`: each process runs the entry script's init() and run(mini_batch)",
        )
    entry = task.get("entry_script")
    if not isinstance(entry, str) or not entry.strip():
        problem("a parallel task names its `entry_script`", ("task", "entry_script"), "write `entry_script: score.py`")
    append = task.get("append_row_to")
    append_name = binding_name(append, "outputs") if append is not None else None
    if append is not None and append_name is None:
        problem(
            f"append_row_to must be `${{{{outputs.NAME}}}}` naming one of the step's outputs, not {append!r}",
            ("task", "append_row_to"),
            "write `append_row_to: ${{outputs.result}}` and declare `result` under outputs",
        )
    arguments = task.get("program_arguments")
    arguments = "" if arguments is None else arguments  # `program_arguments:` with nothing: none
    if not isinstance(arguments, str):
        problem("program_arguments is one string", ("task", "program_arguments"), "write `program_arguments: --a 1`")
        arguments = ""
    return entry, append_name, arguments


def _split(raw: dict[str, Any], input_type: str, problem: ProblemAt) -> tuple[int | None, int | None]:
    if "mini_batch_size" not in raw:
        if input_type == "mltable":
            return None, DEFAULT_BYTES_PER_BATCH
        return DEFAULT_FILES_PER_BATCH, None
    value = raw["mini_batch_size"]
    found = batch_size(value)
    if found is None:
        problem(
            f"mini_batch_size {value!r} is neither a count nor a size",
            ("mini_batch_size",),
            'write a count of files ("10") for a folder, or a size ("100kb", "10mb") for an MLTable',
        )
        return DEFAULT_FILES_PER_BATCH, None
    if found[1] is not None and input_type in ("uri_folder", "uri_file"):
        problem(
            f"mini_batch_size {value!r} is a size, which splits an MLTable; the input is a {input_type}",
            ("mini_batch_size",),
            'give a count of files ("10"), or make the input an mltable',
        )
    if "partition_keys" in raw:
        problem(
            "mini_batch_size and partition_keys contradict each other: partition_keys make one mini-batch per key",
            ("mini_batch_size",),
            "remove one of them",
        )
    return found


def _partition_keys(raw: dict[str, Any], input_type: str, problem: ProblemAt) -> tuple[str, ...]:
    if "partition_keys" not in raw:
        return ()
    keys = raw["partition_keys"]
    if isinstance(keys, str):  # "Store,Brand", as the SDK takes them too
        keys = [k.strip() for k in keys.split(",") if k.strip()]
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        problem("partition_keys is a list of column names", ("partition_keys",), "write [Store, Brand]")
        return ()
    if input_type in ("uri_folder", "uri_file"):
        problem(
            f"partition_keys split a table by columns; the input is a {input_type}",
            ("partition_keys",),
            "make input_data an mltable input, or split by mini_batch_size",
        )
    return tuple(keys)


def _predefined(arguments: str, problem: ProblemAt) -> dict[str, Any]:
    """The predefined arguments in `program_arguments`, each converted (a bad value is refused)."""
    try:
        words = shlex.split(arguments)
    except ValueError as exc:
        problem(f"program_arguments cannot be split into words: {exc}", ("task", "program_arguments"), "close quotes")
        return {}
    found: dict[str, Any] = {}
    for index, word in enumerate(words):
        name, _, inline = word.partition("=")
        if name not in PREDEFINED:
            continue
        value = inline if inline else (words[index + 1] if index + 1 < len(words) else "")
        if "${{" in value:
            continue  # a binding: its value is known at run time
        try:
            found[name] = PREDEFINED[name](value)
        except ValueError:
            problem(
                f"{name} {value!r} is not a {PREDEFINED[name].__name__}",
                ("task", "program_arguments"),
                f"write e.g. `{name} 5`",
            )
    return found
