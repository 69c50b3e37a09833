"""`distrun plan` as text: what every process shares once, then per node and per process only
what differs.

A 2 x 4 job has ~25 variables per process of which only a handful (RANK, LOCAL_RANK, ...)
differ; printing all of them for every process hid the ones that matter.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from distrun.plan.model import tf_config


def _environment(proc: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, str]:
    """Every variable the process gets, defaults marked as such."""
    env = {key: str(value) for key, value in {**plan.get("shared_env", {}), **proc["env"]}.items()}
    if proc.get("tf_task") and plan.get("tf_cluster"):
        env["TF_CONFIG"] = tf_config(plan["tf_cluster"], *proc["tf_task"])
    for key, value in proc.get("env_defaults", {}).items():
        env[key] = f"{value}  (unless already set)"
    return env


def _shared(envs: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The variables every one of `envs` has, with the same value."""
    common: dict[str, str] | None = None
    for env in envs:
        if common is None:
            common = dict(env)
        else:
            common = {key: value for key, value in common.items() if env.get(key) == value}
    return common or {}


def _env_lines(env: Mapping[str, str], indent: str) -> list[str]:
    return [f"{indent}{key}={env[key]}" for key in sorted(env)]


def timeouts_text(timeouts: list[dict[str, Any]]) -> list[str]:
    """One line each: `limits.timeout: 3600 s (the job fails when reached)`, `limits.hang_timeout: none`."""
    lines = []
    for t in timeouts:
        shown = f"{t['seconds']:g} s" if t["seconds"] is not None else (t.get("value") or "none")
        lines.append(f"{t['name']}: {shown} ({t['source']})")
    return lines


def plan_as_text(rendered: dict[str, Any]) -> str:
    plan = rendered["plan"]
    lines = [f"compute: {rendered['compute']} ({rendered['type']})"]
    lines += [f"note: {note}" for note in [*rendered.get("notes", []), *plan.get("notes", [])]]
    lines += [f"timeout: {line}" for line in timeouts_text(rendered.get("timeouts", []))]
    if rendered.get("script"):
        lines += [f"--- {rendered.get('script_name', 'script')} ---", rendered["script"].rstrip(), "---"]
    lines.append(
        f"job: {plan['job_name']}  distribution: {plan['distribution']}  world size: {plan['world_size']}  "
        f"master: {plan['master_addr']}:{plan['master_port']}"
    )
    lines.append(f"command: {plan['command']}")
    if rendered.get("runs_in"):
        lines.append(f"runs in: {rendered['runs_in']}")
    for name, given in rendered.get("inputs", {}).items():
        lines.append(f"input {name}: {given['path']} -> {given['local']}  ({given['source']})")
    procs = [proc for node in plan["nodes"] for proc in node["processes"]]
    envs = {id(proc): _environment(proc, plan) for proc in procs}
    job_env = _shared(envs.values())
    argvs = {shlex.join(proc["argv"]) for proc in procs}
    cwds = {proc["cwd"] for proc in procs}
    show_argv, show_cwd = len(argvs) > 1, len(cwds) > 1
    if len(argvs) == 1:
        lines.append(f"argv (every process): {next(iter(argvs))}")
    if len(cwds) == 1:
        lines.append(f"cwd (every process): {next(iter(cwds))}")
    if job_env:
        lines.append("environment of every process:")
        lines += _env_lines(job_env, "  ")
    for node in plan["nodes"]:
        gpus = f", GPUs {','.join(node['gpus'])}" if node.get("gpus") else ""
        lines.append(f"node {node['node_rank']} ({node['host']}): {len(node['processes'])} processes{gpus}")
        for name, content in node.get("files", {}).items():
            lines.append(f"  file {name}:")
            lines += ["    " + line for line in content.splitlines()]
        node_envs = [envs[id(proc)] for proc in node["processes"]]
        node_env = {k: v for k, v in _shared(node_envs).items() if k not in job_env}
        if node_env and len(node["processes"]) > 1:
            lines.append("  environment of every process on this node:")
            lines += _env_lines(node_env, "    ")
        else:
            node_env = {}
        for proc in node["processes"]:
            lines.append(f"  [{proc['label']}] {proc['name']}  log: user_logs/{proc['log_name']}")
            if show_argv:
                lines.append(f"    argv: {shlex.join(proc['argv'])}")
            if show_cwd:
                lines.append(f"    cwd: {proc['cwd']}")
            own = {k: v for k, v in envs[id(proc)].items() if k not in job_env and k not in node_env}
            lines += _env_lines(own, "    ")
    return "\n".join(lines)
