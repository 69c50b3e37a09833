"""`distrun plan` as text: per node, per process, its command and environment."""

from __future__ import annotations

import shlex
from typing import Any

from distrun.plan.model import tf_config


def plan_as_text(rendered: dict[str, Any]) -> str:
    plan = rendered["plan"]
    lines = [f"compute: {rendered['compute']} ({rendered['type']})"]
    lines += [f"note: {note}" for note in [*rendered.get("notes", []), *plan.get("notes", [])]]
    if rendered.get("script"):
        lines += [f"--- {rendered.get('script_name', 'script')} ---", rendered["script"].rstrip(), "---"]
    lines.append(
        f"job: {plan['job_name']}  distribution: {plan['distribution']}  world size: {plan['world_size']}  "
        f"master: {plan['master_addr']}:{plan['master_port']}"
    )
    lines.append(f"command: {plan['command']}")
    for node in plan["nodes"]:
        gpus = f", GPUs {','.join(node['gpus'])}" if node.get("gpus") else ""
        lines.append(f"node {node['node_rank']} ({node['host']}): {len(node['processes'])} processes{gpus}")
        for name, content in node.get("files", {}).items():
            lines.append(f"  file {name}:")
            lines += ["    " + line for line in content.splitlines()]
        for proc in node["processes"]:
            lines.append(f"  [{proc['label']}] {proc['name']}  log: user_logs/{proc['log_name']}")
            lines.append(f"    argv: {shlex.join(proc['argv'])}")
            lines.append(f"    cwd: {proc['cwd']}")
            env = dict(proc["env"])
            if proc.get("tf_task") and plan.get("tf_cluster"):
                env["TF_CONFIG"] = tf_config(plan["tf_cluster"], *proc["tf_task"])
            for key in sorted(env):
                lines.append(f"    {key}={env[key]}")
            for key in sorted(proc.get("env_defaults", {})):
                lines.append(f"    {key}={proc['env_defaults'][key]}  (unless already set)")
    return "\n".join(lines)
