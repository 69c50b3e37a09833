"""Compute: the compute types this install knows and the compute targets that use them.

Compute types: each one's backend module and the pip extra that brings its engine's client.
Adding a backend is one line in `BACKENDS`; `distrun.backends.registry` imports the module only
when a job needs it, and says what to install when it is missing.

Compute targets: `local` (this machine) and the ones named in $DISTRUN_HOME/config.yaml.

    compute:
      hpc:
        type: slurm
        partition: debug

A job says `compute: hpc` or Azure ML's `compute: azureml:hpc`; `--compute` overrides it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.spec.config_sections import remove_entry, write_entry

if TYPE_CHECKING:
    from distrun.store.index import JobRecord


@dataclass(frozen=True)
class BackendEntry:
    module: str
    extra: str | None = None  # `pip install 'distrun[<extra>]'` brings what it needs
    # False for a type distrun provides itself (local: its one target is always there), which
    # `distrun compute create --type` neither offers nor accepts.
    user_created: bool = True
    # True for the type whose jobs run on this machine, each node simulated (what the SDK's
    # AmlCompute stands for here).
    on_this_machine: bool = False
    # True where a job's nodes see this machine's DISTRUN_HOME (local; Slurm, whose DISTRUN_HOME
    # must be on the filesystem its nodes share). False where the job's files are shipped to the
    # nodes (Ray, Kubernetes): an input that is another job's output is then copied into the job
    # folder, to travel with the job's code (`distrun.prepare.submission.bind`).
    shares_job_folders: bool = True
    # The one kind of job a target of this type runs ("spark": a Spark cluster runs Spark jobs
    # only); None for every kind.
    only_kind: str | None = None


# Each entry names the module that defines `BACKEND` (an instance of `distrun.backends.base.Backend`;
# a backend package's `__init__`, or a module of it when the package must stay light to import).
BACKENDS: dict[str, BackendEntry] = {
    "local": BackendEntry("distrun.backends.local.backend", user_created=False, on_this_machine=True),
    "slurm": BackendEntry("distrun.backends.slurm.backend"),
    "ray": BackendEntry("distrun.backends.ray.backend", extra="ray", shares_job_folders=False),
    "kubernetes": BackendEntry("distrun.backends.kubernetes.backend", extra="kubernetes", shares_job_folders=False),
    # A Spark standalone cluster: Spark jobs' drivers run here in client mode, their executors there.
    "spark": BackendEntry("distrun.backends.spark.backend", extra="spark", only_kind="spark"),
}
COMPUTE_TYPES = tuple(BACKENDS)
USER_KINDS = tuple(kind for kind, entry in BACKENDS.items() if entry.user_created)  # `compute create --type`


def runs_on_this_machine(target_type: str) -> bool:
    """Whether a target of this type runs its jobs on this machine (its nodes simulated)."""
    entry = BACKENDS.get(target_type)
    return entry is not None and entry.on_this_machine


def refuse_other_kinds(target: ComputeTarget, kind: str) -> None:
    """Refuse a job of a kind its target's type does not run (a command job on a Spark cluster)."""
    entry = BACKENDS.get(target.type)
    if entry is not None and entry.only_kind is not None and kind != entry.only_kind:
        raise DistrunError(
            f"compute target {target.name!r} is a {target.type} target: it runs {entry.only_kind} jobs"
            f" (`type: {entry.only_kind}`) only",
            "run this job on another compute target (`--compute local`)",
        )


def shares_job_folders(target_type: str) -> bool:
    """Whether a target of this type runs its jobs where this machine's job folders are seen (by path)."""
    entry = BACKENDS.get(target_type)
    return entry is None or entry.shares_job_folders


LOCAL = "local"
TARGET_TYPES = COMPUTE_TYPES  # whether this install can run a type is the registry's to say, when it is used


@dataclass(frozen=True)
class ComputeTarget:
    name: str
    type: str
    settings: dict[str, Any] = field(default_factory=dict)

    def stored(self) -> dict[str, Any]:
        """What a job's record keeps of its target (`JobRecord.target`), as plain JSON values."""
        # config.yaml's loader gives its own mapping and scalar types; the record keeps plain JSON.
        return {"type": self.type, "settings": json.loads(json.dumps(self.settings, default=str))}


def submitted_target(record: JobRecord, config_path: Path) -> ComputeTarget:
    """The target a job was submitted to, as it was then: a job never follows its target's name
    to another engine or other settings when config.yaml changes (or loses the target) later.

    Records written before distrun kept the target have only its name; they read config.yaml.
    """
    stored = record.target
    if isinstance(stored, dict) and isinstance(stored.get("type"), str) and isinstance(stored.get("settings"), dict):
        return ComputeTarget(record.compute, stored["type"], dict(stored["settings"]))
    return resolve_target(record.compute, config_path)


def target_name(reference: str | None) -> str:
    """`None`/`local` -> local; `azureml:NAME` -> NAME."""
    if not reference:
        return LOCAL
    if reference.startswith("azureml:"):
        reference = reference[len("azureml:") :]
    return reference.strip() or LOCAL


def read_targets(config_path: Path) -> dict[str, ComputeTarget]:
    if not config_path.is_file():
        return {}
    from distrun.spec.yaml_source import read_yaml_file

    data, smap = read_yaml_file(config_path)
    section = (data or {}).get("compute") if isinstance(data, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise DistrunError(f"{smap.find(('compute',))}: compute: expected a mapping of target names")
    targets = {}
    for name, body in section.items():
        if not isinstance(body, dict) or body.get("type") not in TARGET_TYPES:
            raise DistrunError(
                f"{smap.find(('compute', name))}: compute.{name}: expected a mapping with type: "
                + " | ".join(TARGET_TYPES)
            )
        settings = {k: v for k, v in body.items() if k != "type"}
        targets[name] = ComputeTarget(name, body["type"], settings)
    return targets


# The seed draft's `compute: {infrastructure: k8s, target: NAME}` (or `type:`): which target type it means.
INFRASTRUCTURE_TYPES = {"k8s": "kubernetes", "kubernetes": "kubernetes", "slurm": "slurm", "ray": "ray"}


def resolve_target(reference: str | None, config_path: Path, infrastructure: str | None = None) -> ComputeTarget:
    """The target a job names; `infrastructure` (the seed form's) must agree with its type."""
    name = target_name(reference)
    if name == LOCAL:
        return ComputeTarget(LOCAL, LOCAL)
    targets = read_targets(config_path)
    wanted = INFRASTRUCTURE_TYPES.get(str(infrastructure).lower()) if infrastructure else None
    if name not in targets:
        known = ", ".join(["local", *sorted(targets)])
        how = f"distrun compute create --name {name} --type {wanted}" if wanted else "distrun compute create"
        if wanted == "kubernetes":
            how += " --set context=CONTEXT --set namespace=NAMESPACE"
        raise DistrunError(
            f"unknown compute target {name!r}; known targets: {known}",
            f"define it in {config_path} under `compute:` or with `{how}`",
        )
    target = targets[name]
    if wanted and target.type != wanted:
        raise DistrunError(
            f"the job's compute says infrastructure {infrastructure} but target {name!r} is of type {target.type}",
            f"point the job at a {wanted} target, or use --compute NAME",
        )
    return target


def add_target(config_path: Path, name: str, kind: str, settings: dict[str, Any]) -> ComputeTarget:
    """Add or replace one target in config.yaml, keeping the rest of the file."""
    if kind not in USER_KINDS:
        raise DistrunError(f"unknown compute type {kind!r}", "use " + ", ".join(USER_KINDS))
    if name == LOCAL or not name.replace("-", "").replace("_", "").isalnum():
        raise DistrunError(f"compute name {name!r} is not allowed", "use letters, digits, - and _ (not 'local')")
    write_entry(config_path, "compute", name, {"type": kind, **settings})
    return ComputeTarget(name, kind, settings)


def remove_target(config_path: Path, name: str) -> None:
    """Remove one target from config.yaml. Jobs sent to it keep the target they recorded."""
    if target_name(name) == LOCAL:
        raise DistrunError("local compute is built in: it cannot be deleted")
    if not remove_entry(config_path, "compute", name):
        raise DistrunError(f"no compute target named {name!r}", "`distrun compute list` shows the targets there are")


def name_local_target(config_path: Path, name: str) -> tuple[ComputeTarget, bool]:
    """The target `name`, added to config.yaml as a local target when it is not there (the SDK's
    `AmlCompute(name=...)`: a cluster's name that jobs then use). True when it was added."""
    if target_name(name) == LOCAL:
        return ComputeTarget(LOCAL, LOCAL), False
    existing = read_targets(config_path).get(name)
    if existing is not None:
        return existing, False
    if not name.replace("-", "").replace("_", "").isalnum():
        raise DistrunError(f"compute name {name!r} is not allowed", "use letters, digits, - and _")
    write_entry(config_path, "compute", name, {"type": LOCAL})
    return ComputeTarget(name, LOCAL), True
