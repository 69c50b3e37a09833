"""Checks a schema cannot express: references in the command, reserved variables, local paths.

They run on a job that passed schema validation, and read the file system only to see that
the code folder and input paths exist (relative paths start at the job file's folder).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from distrun.core.errors import DistrunError, Position, Problem
from distrun.spec import models
from distrun.spec.command_template import UnsafeValueError, references, render_command, render_value
from distrun.spec.paths import local_path

PositionOf = Callable[..., Position]


def semantic_problems(spec: models.JobSpec, base_dir: Path, position: PositionOf) -> list[Problem]:
    """Every problem of a schema-valid job; `position(*key_path)` says where a key was written."""
    return [
        *_unpassable_problems(spec, position),
        *_env_problems(spec, position),
        *_reference_problems(spec, position),
        *_path_problems(spec, base_dir, position),
        *_size_problems(spec, position),
        *_environment_problems(spec, base_dir, position),
        *_output_problems(spec, position),
    ]


def _output_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    """An output `path` distrun cannot write (a URL, a relative path)."""
    if not spec.outputs:
        return []  # the data machinery stays off the launch path of a job without outputs
    from distrun.data.locations import output_location
    from distrun.store.layout import distrun_home

    problems = []
    for name, out in spec.outputs.items():
        try:
            output_location(out.path if out else None, name, spec.name or "job", distrun_home())
        except DistrunError as exc:
            problems.append(Problem(exc.message, f"outputs.{name}.path", position("outputs", name, "path"), exc.hint))
    return problems


def _environment_problems(spec: models.JobSpec, base_dir: Path, position: PositionOf) -> list[Problem]:
    """A conda_file that cannot be built here (conda-only packages, a missing Python)."""
    if spec.environment is None:  # most jobs: skip importing the environment machinery at all
        return []
    from distrun.environments.resolve import rank_python
    from distrun.store.layout import distrun_home

    return rank_python(spec.environment, base_dir, distrun_home(), position)[1]


# Far above any real cluster, low enough that planning stays bounded in time and memory.
MAX_PROCESSES = 1 << 20


def process_count(spec: models.JobSpec) -> int:
    dist = spec.distribution
    if isinstance(dist, models.TensorFlowDistribution):
        workers = dist.worker_count if dist.worker_count is not None else spec.resources.instance_count
        return workers + dist.parameter_server_count + dist.chief_count
    per_node = getattr(dist, "process_count_per_instance", 1)
    return spec.resources.instance_count * per_node


def _size_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    total = process_count(spec)
    if total <= MAX_PROCESSES:
        return []
    return [
        Problem(
            f"the job would have {total} processes, more than distrun plans ({MAX_PROCESSES})",
            "resources.instance_count",
            position("resources", "instance_count"),
            "lower resources.instance_count or the per-node process count",
        )
    ]


def is_reserved_env_var(name: str) -> bool:
    return name in models.RESERVED_ENV_VARS or name.startswith(models.RESERVED_ENV_PREFIXES)


def _reserved(variables: Mapping[str, str], path: tuple[str, ...], position: PositionOf) -> list[Problem]:
    return [
        Problem(
            f"{name} is set by distrun for every process and cannot be set here",
            ".".join((*path, name)),
            position(*path, name),
            "remove it: distrun computes it from `resources` and `distribution` (only MASTER_PORT may be pinned)",
        )
        for name in variables
        if is_reserved_env_var(name)
    ]


def _env_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    # Parameter-server variables are checked with the other TensorFlow rules (checks_tensorflow).
    variables = spec.environment_variables
    path = ("environment_variables",)
    return [
        *_reserved(variables, path, position),
        *env_name_problems(variables, path, position),
        *_master_port_problems(variables, path, position),
    ]


def _master_port_problems(variables: Mapping[str, str], path: tuple[str, ...], position: PositionOf) -> list[Problem]:
    """A pinned MASTER_PORT is a port every rank connects to: a number the kernel can bind."""
    value = variables.get("MASTER_PORT")
    if value is None:
        return []
    text = str(value).strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= 65535:
        return []
    return [
        Problem(
            f"MASTER_PORT must be a TCP port number from 1 to 65535, not {str(value)[:40]!r}",
            ".".join((*path, "MASTER_PORT")),
            position(*path, "MASTER_PORT"),
            "pin a free port, e.g. MASTER_PORT: 29500, or leave it out and distrun picks a free one",
        )
    ]


def env_name_problems(variables: Mapping[str, str], path: tuple[str, ...], position: PositionOf) -> list[Problem]:
    """Names no process can receive: the environment is a list of NAME=value strings."""
    return [
        Problem(
            f"environment variable name {name!r} cannot be empty or contain '='",
            ".".join((*path, name)),
            position(*path, name),
            "use letters, digits and '_', e.g. MY_SETTING",
        )
        for name in variables
        if not name or "=" in name
    ]


def _unpassable_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    """Text with a NUL character: no command line, environment or file name can carry one,
    so the job could only fail when its processes start."""
    problems: list[Problem] = []

    def found(what: str, path: tuple[str | int, ...]) -> None:
        problems.append(
            Problem(
                f"{what} contains a NUL character (\\0), which no command, environment or path can hold",
                ".".join(map(str, path)),
                position(*path),
                "remove the \\0",
            )
        )

    def walk(value: object, path: tuple[str | int, ...]) -> None:
        if isinstance(value, str):
            if "\0" in value:
                found("the value", path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\0" in key:
                    found(f"the key {key!r}", path)  # reported at its mapping: the key has no position
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, index))

    walk(spec.model_dump(mode="json", by_alias=True, exclude_none=True), ())
    return problems


def _reference_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    return [
        *reference_problems(spec.command, spec.inputs, spec.outputs, position),
        *_placement_problems(spec, position),
    ]


def _placement_problems(spec: models.JobSpec, position: PositionOf) -> list[Problem]:
    """A literal value the command puts where no writing of it is safe (a comment, backticks,
    `${...}`, arithmetic): refused at load, as rendering it would refuse it when the job starts.
    Paths stand in as a plain word here: they are only known then."""
    values: dict[str, str] = {}
    for name, value in spec.inputs.items():
        if isinstance(value, models.LiteralInput):
            given = value.value if value.value is not None else value.default
            if given is not None:
                values[name] = render_value(given)
        elif not isinstance(value, models.DataInput):
            values[name] = render_value(value)
        else:
            values[name] = "path"
    try:
        render_command(spec.command, values, dict.fromkeys(spec.outputs, "path"))
    except UnsafeValueError as exc:
        return [Problem(exc.message, "command", position("command"), exc.hint)]
    except KeyError:  # a reference to nothing: reference_problems says so
        pass
    return []


def reference_problems(
    command: str, inputs: Mapping[str, object], outputs: Mapping[str, object], position: PositionOf
) -> list[Problem]:
    """`${{inputs.x}}` / `${{outputs.x}}` in the command that name nothing. Works on the raw
    document too, so that these are reported together with schema errors."""
    refs, unknown = references(command)
    where = position("command")
    problems = []
    for expr in unknown:
        problems.append(
            Problem(
                f"unsupported expression {expr} in the command",
                "command",
                where,
                "only ${{inputs.NAME}} and ${{outputs.NAME}} can be used in a command",
            )
        )
    seen: set[tuple[str, str]] = set()
    for ref in refs:
        table: Mapping[str, object] = inputs if ref.kind == "inputs" else outputs
        if ref.name in table or ref.optional or (ref.kind, ref.name) in seen:
            continue
        seen.add((ref.kind, ref.name))
        singular = ref.kind[:-1]
        import difflib  # error paths only: not loaded by a valid job's run

        close = difflib.get_close_matches(ref.name, list(table), n=1)
        add = f"add `{ref.name}` under `{ref.kind}:`"
        hint = f"did you mean {ref.kind}.{close[0]}? Otherwise {add}" if close else add
        problems.append(
            Problem(
                f"${{{{{ref.kind}.{ref.name}}}}} refers to an undefined {singular} {ref.name!r}",
                "command",
                where,
                hint,
            )
        )
    return problems


# Input modes whose data distrun copies into the job folder (submission.COPY_MODES).
COPIED_MODES = ("download", "eval_download")


_FETCHED = Path("/dev/null/fetched")  # stands for "remote: fetched when the job starts"


def _data_path(text: str, base_dir: Path, kind: str = "uri_folder") -> tuple[Path | None, str | None]:
    """The local path of a data input (datastores, assets, job outputs and URL mirrors resolved),
    and the url_mirrors entry that gave it, said where the path is missing."""
    from distrun.data.locations import input_location
    from distrun.store.layout import distrun_home

    location = input_location(text, base_dir, distrun_home(), kind=kind)
    if location.url is not None:
        return _FETCHED, None
    mirror = location.mirror
    return location.path, None if mirror is None else f"url_mirrors entry {mirror.prefix} ({mirror.where})"


def _kind_of(path: Path) -> str:
    """'folder', 'file', 'missing' or 'unreadable' (a path the OS refuses to look at)."""
    try:
        if path.is_dir():
            return "folder"
        if path.exists():
            return "file"
    except (OSError, ValueError):  # too long, NUL bytes, no permission on a parent
        return "unreadable"
    return "missing"


def _special_kind(path: Path) -> str | None:
    """'a named pipe', 'a socket', 'a character device'...: what no copy can be made of."""
    import stat

    from distrun.core.safe_files import kind_of

    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else kind_of(mode)


def _path_problems(spec: models.JobSpec, base_dir: Path, position: PositionOf) -> list[Problem]:
    """The code folder and every data input's path, as this machine sees them."""
    problems = _code_problems(spec, base_dir, position)
    for name, value in spec.inputs.items():
        if isinstance(value, models.DataInput):
            problems += _input_path_problems(name, value, base_dir, position)
    return problems


def _code_problems(spec: models.JobSpec, base_dir: Path, position: PositionOf) -> list[Problem]:
    if spec.code is None:
        return []
    windows = windows_path_problem(spec.code, "code", position)
    if windows is not None:
        return [windows]
    code = local_path(base_dir, spec.code)
    kind = _kind_of(code) if code is not None else "remote"
    if kind == "remote":
        return [
            Problem(
                f"code {spec.code!r} is not a folder on this machine",
                "code",
                position("code"),
                "give a local folder (relative to the job file); download remote code first",
            )
        ]
    if kind != "folder":
        what = {"file": "is a file, not a folder", "missing": "does not exist"}.get(kind, "cannot be read")
        return [
            Problem(
                f"code folder {code} {what}",
                "code",
                position("code"),
                "point `code` at the folder holding your scripts (relative paths start at the job file's folder)",
            )
        ]
    return []


def _input_path_problems(name: str, value: models.DataInput, base_dir: Path, position: PositionOf) -> list[Problem]:
    """A data input's path: where it resolves to, and whether what is there fits its type and mode."""
    key = f"inputs.{name}.path"
    where = position("inputs", name, "path")
    try:
        path, mirror = _data_path(value.path, base_dir, value.type)
    except DistrunError as exc:  # an unknown asset, datastore path, job output or fsspec plugin
        return [Problem(f"input {name}: {exc.message}", key, where, exc.hint)]
    if path == _FETCHED:
        return []  # a URL: downloaded when the job starts
    if path is None:
        return [
            Problem(
                f"input {name}: {value.path!r} is not on this machine",
                key,
                where,
                "use a local path, azureml://datastores/<ds>/paths/<p>, azureml:NAME:VERSION, "
                "azureml://jobs/<job>/outputs/<name>, http(s):// or s3:// (see docs/environments-and-data.md)",
            )
        ]
    found = _input_kind_problem(name, value, path, mirror)
    return [] if found is None else [Problem(found[0], key, where, found[1])]


def _input_kind_problem(name: str, value: models.DataInput, path: Path, mirror: str | None) -> tuple[str, str] | None:
    """What is wrong with what lies at an input's local `path` (message, hint), or None."""
    kind = _kind_of(path)
    special = _special_kind(path) if kind == "file" and value.mode in COPIED_MODES else None
    absent = "does not exist" if kind == "missing" else "cannot be read"
    if special is not None:
        return (
            f"input {name}: {path} is {special}, not data: a download input is copied into the job",
            "point `path` at a file or folder of data, or read it in place with mode: ro_mount",
        )
    if kind in ("missing", "unreadable") and mirror is not None:
        return (
            f"input {name}: {path} {absent} (the local copy of {value.path} by the {mirror})",
            "put the copy there, or remove the entry from $DISTRUN_HOME/config.yaml to download the URL",
        )
    if kind in ("missing", "unreadable") and value.path.startswith("azureml:"):
        return (
            f"input {name}: {value.path} is {path}, which {absent}",
            "write the data there first (e.g. by an earlier job's output), or set the datastore's folder "
            "in $DISTRUN_HOME/config.yaml (datastores: {NAME: /path/to/folder})",
        )
    if kind in ("missing", "unreadable"):
        return (
            f"input {name}: {path} {absent}",
            "check the path (relative paths start at the job file's folder)",
        )
    if value.type == "uri_file" and kind != "file":
        return (
            f"input {name} is a uri_file but {path} is a folder",
            "use type: uri_folder for a folder, or point `path` at one file",
        )
    if value.type == "uri_folder" and kind != "folder":
        return (
            f"input {name} is a uri_folder but {path} is a file",
            "use type: uri_file for a single file, or point `path` at its folder",
        )
    return None


# `C:\Users\me\src`, `.\src`, `src\train`: a path written on Windows. On this machine the
# backslashes are part of one file name, so the folder "does not exist" for a reason users miss.
_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|\.{1,2}\\)|^[^/:]*\\")


def windows_path_problem(text: str, key: str, position: PositionOf) -> Problem | None:
    """A problem when `text` looks like a Windows path; None otherwise."""
    if not isinstance(text, str) or not _WINDOWS_PATH.search(text):
        return None
    relative = not re.match(r"^(?:[A-Za-z]:|\\\\)", text)
    suggestion = text.replace("\\", "/") if relative else "./" + text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return Problem(
        f"{text} looks like a Windows path: on this machine a backslash is part of a file name",
        key,
        position(*key.split(".")),
        f"write a path with forward slashes, relative to the job file, e.g. `{key.rsplit('.', 1)[-1]}: {suggestion}`",
    )
