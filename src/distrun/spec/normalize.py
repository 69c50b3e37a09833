"""Rewrite older job spellings into the CLI v2 shape before validation.

Three forms load into the one model:
- CLI v2 (the reference form): untouched.
- The 2021 preview: `code: {local_path}`, `compute: {target, instance_count}`,
  `environment: {docker: {image}}`, `distribution.process_count` (a total), `{inputs.x}`.
- The seed draft: a `distributed:` section (`mpi.worker.count`, `slots_per`,
  `launcher.resources`, `pytorch.worker.count`, `tensorflow.worker/parameter_server`) and
  `compute: {infrastructure, instance_type, target}`.

Values a newer key already gives win over the older spelling; positions follow the values.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.spec.model_errors import LAUNCHER_NOTE
from distrun.spec.source_map import SourceMap

_SINGLE_BRACE = re.compile(r"(?<![\$\{])\{((?:inputs|outputs)\.[A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def normalize(data: Any, smap: SourceMap) -> Any:
    if not isinstance(data, dict):
        return data
    data = copy.deepcopy(data)  # rewrites below edit nested mappings; the caller's data stays as given
    _code(data, smap)
    _environment(data, smap)
    _compute(data, smap)
    _distributed(data, smap)
    _process_count_total(data, smap)
    if isinstance(data.get("command"), str):
        data["command"] = _SINGLE_BRACE.sub(r"${{\1}}", data["command"])
    return data


def _code(data: dict[str, Any], smap: SourceMap) -> None:
    code = data.get("code")
    if isinstance(code, dict) and set(code) <= {"path", "local_path"} and code:
        key = "path" if "path" in code else "local_path"
        smap.move(("code", key), ("code",))
        data["code"] = code[key]


def _environment(data: dict[str, Any], smap: SourceMap) -> None:
    if "environment" in data:
        data["environment"] = _docker_environment(data["environment"], ("environment",), smap)


def _docker_environment(env: Any, path: tuple[str, ...], smap: SourceMap) -> Any:
    """`{docker: {image, build}}` (2021 preview, seed draft) -> `{image, build}`."""
    if not (isinstance(env, dict) and isinstance(env.get("docker"), dict)):
        return env
    docker = env["docker"]
    rest = {k: v for k, v in env.items() if k != "docker"}
    for key in ("image", "build"):
        if key in docker:
            smap.move(path + ("docker", key), path + (key,))
            rest.setdefault(key, docker[key])
    return rest


def _resources(data: dict[str, Any]) -> dict[str, Any]:
    res = data.get("resources")
    if not isinstance(res, dict):
        res = {} if res is None else res
        data["resources"] = res
    return res


def _compute(data: dict[str, Any], smap: SourceMap) -> None:
    compute = data.get("compute")
    if not isinstance(compute, dict):
        return
    known = {"target", "instance_count", "node_count", "instance_type", "infrastructure", "type"}
    unknown = sorted(set(compute) - known)
    if unknown:
        return  # leave it: validation reports compute as the wrong type, with its position
    res = _resources(data)
    if not isinstance(res, dict):
        return
    for old in ("instance_count", "node_count"):
        if old in compute and "instance_count" not in res:
            smap.move(("compute", old), ("resources", "instance_count"))
            res["instance_count"] = compute[old]
    if "instance_type" in compute and "instance_type" not in res:
        smap.move(("compute", "instance_type"), ("resources", "instance_type"))
        res["instance_type"] = compute["instance_type"]
    kind = compute.get("infrastructure", compute.get("type"))
    if kind is not None:
        data.setdefault("properties", {})
        if isinstance(data["properties"], dict):
            data["properties"].setdefault("compute_infrastructure", kind)
    smap.move(("compute", "target"), ("compute",))
    data["compute"] = compute.get("target")


# The draft's sections and the keys each takes.
_DRAFT_KEYS = {
    "mpi": {"worker", "launcher"},
    "pytorch": {"worker", "resource_limits"},
    "tensorflow": {"worker", "parameter_server", "chief"},
}


def _one_problem(message: str, key: str, where: Any, hint: str) -> ValidationError:
    return ValidationError([Problem(message, key, where, hint)])


def _distributed(data: dict[str, Any], smap: SourceMap) -> None:
    """The seed draft's `distributed: {KIND: ...}` -> `distribution`, `resources` and `properties`."""
    section = data.get("distributed")
    if section is None:
        return
    kind, body = _draft_section(data, section, smap)
    base = ("distributed", kind)
    _reject_unknown(body, _DRAFT_KEYS[kind], base, smap)
    worker = body.get("worker")
    worker = {} if worker is None else worker
    _reject_unknown(worker, {"count", "slots_per", "resources", "resource_limits"}, base + ("worker",), smap)
    res = _resources(data)
    if not isinstance(res, dict):
        res = {}  # a wrong `resources` is reported by validation; nothing to merge into it
    props = data.setdefault("properties", {})
    if kind in ("mpi", "pytorch"):
        dist = _draft_mpi_or_pytorch(kind, body, worker, res, smap)
    else:
        dist = _draft_tensorflow(body, worker, smap)
    for key in ("resources", "resource_limits"):
        if key in worker and isinstance(props, dict):
            props.setdefault("worker_" + key, worker[key])
    if "resource_limits" in body and isinstance(props, dict):
        props.setdefault("worker_resource_limits", body["resource_limits"])
    smap.move(("distributed",), ("distribution",))
    data["distribution"] = dist
    del data["distributed"]


def _draft_section(data: dict[str, Any], section: Any, smap: SourceMap) -> tuple[str, dict[str, Any]]:
    """The draft section's one kind and its body, or the error that it is not one."""
    where = smap.find(("distributed",))
    if not isinstance(section, dict) or len(section) != 1:
        raise _one_problem(
            "`distributed` must hold exactly one of mpi, pytorch, tensorflow",
            "distributed",
            where,
            "write e.g. distributed: {mpi: {worker: {count: 2}}}",
        )
    if "distribution" in data:
        raise _one_problem(
            "both `distribution` and the draft `distributed` section are given",
            "distributed",
            where,
            "keep one of them",
        )
    kind, body = next(iter(section.items()))
    if kind not in _DRAFT_KEYS:
        raise _one_problem(
            f"unknown distributed type {kind!r}",
            f"distributed.{kind}",
            smap.find(("distributed", kind)),
            "use mpi, pytorch or tensorflow" + LAUNCHER_NOTE.get(str(kind).lower(), ""),
        )
    return kind, {} if body is None else body


def _draft_mpi_or_pytorch(
    kind: str, body: dict[str, Any], worker: dict[str, Any], res: dict[str, Any], smap: SourceMap
) -> dict[str, Any]:
    """`worker.count` is the node count, `worker.slots_per` the processes per node."""
    base = ("distributed", kind)
    dist: dict[str, Any] = {"type": kind}
    if "count" in worker and "instance_count" not in res:
        smap.move(base + ("worker", "count"), ("resources", "instance_count"))
        res["instance_count"] = worker["count"]
    if "slots_per" in worker:
        smap.move(base + ("worker", "slots_per"), ("distribution", "process_count_per_instance"))
        dist["process_count_per_instance"] = worker["slots_per"]
    launcher = body.get("launcher")
    if kind == "mpi" and launcher is not None:
        _reject_unknown(launcher, {"resources"}, base + ("launcher",), smap)
        dist["launcher_resources"] = launcher.get("resources")
    return dist


def _draft_tensorflow(body: dict[str, Any], worker: dict[str, Any], smap: SourceMap) -> dict[str, Any]:
    """Worker, parameter server and chief counts, and the parameter servers' own settings."""
    base = ("distributed", "tensorflow")
    dist: dict[str, Any] = {"type": "tensorflow"}
    if "count" in worker:
        smap.move(base + ("worker", "count"), ("distribution", "worker_count"))
        dist["worker_count"] = worker["count"]
    ps = body.get("parameter_server")
    if ps is not None:
        _reject_unknown(
            ps, {"count", "environment", "environment_variables", "resource_limits"}, base + ("parameter_server",), smap
        )
        if "count" in ps:
            smap.move(base + ("parameter_server", "count"), ("distribution", "parameter_server_count"))
            dist["parameter_server_count"] = ps["count"]
        settings = {k: ps[k] for k in ("environment", "environment_variables", "resource_limits") if k in ps}
        if settings:
            smap.move(base + ("parameter_server",), ("distribution", "parameter_server"))
            dist["parameter_server"] = settings
    chief = body.get("chief")
    if chief is not None:
        _reject_unknown(chief, {"count"}, base + ("chief",), smap)
        dist["chief_count"] = chief.get("count", 1)
    return dist


def _reject_unknown(body: Any, allowed: set[str], path: tuple[str, ...], smap: SourceMap) -> None:
    import difflib

    if not isinstance(body, dict):
        raise ValidationError(
            [
                Problem(
                    "expected a mapping", ".".join(path), smap.find(path), f"allowed keys: {', '.join(sorted(allowed))}"
                )
            ]
        )
    problems = []
    for key in body:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(sorted(allowed))}"
            problems.append(Problem(f"unknown key {key!r}", ".".join(path + (key,)), smap.find(path + (key,)), hint))
    if problems:
        raise ValidationError(problems)


def _process_count_total(data: dict[str, Any], smap: SourceMap) -> None:
    """2021 preview and v1 SDK: `process_count` is a total over all nodes."""
    dist = data.get("distribution")
    if not isinstance(dist, dict) or "process_count" not in dist:
        return
    total = dist["process_count"]
    res = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    nodes = _count(res.get("instance_count", 1) if isinstance(res, dict) else 1)
    if nodes is None:
        return  # validation reports the wrong instance_count, and process_count as an unknown key
    where = smap.find(("distribution", "process_count"))
    total = _count(total)
    if total is None:
        raise ValidationError(
            [
                Problem(
                    f"process_count must be a whole number of at least 1, got {dist['process_count']!r}",
                    "distribution.process_count",
                    where,
                    "process_count is the total over all nodes, e.g. 8 for 2 nodes x 4 processes",
                )
            ]
        )
    if total % nodes:
        raise ValidationError(
            [
                Problem(
                    f"process_count {total} is not a multiple of instance_count {nodes}",
                    "distribution.process_count",
                    where,
                    "process_count is the total over all nodes: make it instance_count x processes per node",
                )
            ]
        )
    dist = {k: v for k, v in dist.items() if k != "process_count"}
    dist.setdefault("process_count_per_instance", total // nodes)
    smap.move(("distribution", "process_count"), ("distribution", "process_count_per_instance"))
    data["distribution"] = dist


def _count(value: Any) -> int | None:
    """A count as validation will read it (`2` or `"2"`), or None when it is not a positive whole number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        value = int(value)
    return value if isinstance(value, int) and value >= 1 else None
