"""`distrun plan pipeline.yml` as text: the graph of steps, then each step's job as `distrun
plan` shows a job (`distrun.plan.text.plan_as_text`)."""

from __future__ import annotations

from typing import Any

from distrun.plan.parallel_text import parallel_lines
from distrun.plan.text import plan_as_text


def pipeline_as_text(planned: dict[str, Any]) -> str:
    steps = planned["steps"]
    title = f"pipeline: {planned['pipeline']}"
    if planned.get("display_name"):
        title += f" ({planned['display_name']})"
    settings = planned["settings"]
    lines = [
        f"{title}  steps: {len(steps)}",
        f"continue_on_step_failure: {str(settings['continue_on_step_failure']).lower()}  "
        f"force_rerun: {str(settings['force_rerun']).lower()}",
    ]
    lines += [f"note: {note}" for note in planned.get("notes", [])]
    lines.append("graph (steps of one level can run at the same time):")
    for step in steps:
        reads = ", ".join(f"{inp} <- {source}" for inp, source in step["reads"].items())
        writes = ", ".join(f"{out} -> pipeline output {name}" for out, name in step["pipeline_outputs"].items())
        after = f"  after {', '.join(step['depends_on'])}" if step["depends_on"] else ""
        extra = "; ".join(part for part in (reads, writes) if part)
        lines.append(f"  level {step['level']}: {step['name']}{after}" + (f"  ({extra})" if extra else ""))
    for step in steps:
        rendered = step["rendered"]
        processes = sum(len(node["processes"]) for node in rendered["plan"]["nodes"])
        origin = f"component {step['component']}" if step["component"] else "inline command"
        counted = f"{processes} process{'es' if processes != 1 else ''}"
        lines.append("")
        sweep = step.get("sweep")
        if sweep is None:
            lines.append(f"=== step {step['name']}: job {step['job']}, {origin}, {counted}")
        else:
            trial = f"trial component {step['component']}" if step["component"] else "inline trial component"
            lines.append(f"=== step {step['name']}: sweep {step['job']}, {trial}, {counted} per trial")
            lines += _sweep_lines(sweep)
        if step.get("parallel"):
            lines += parallel_lines(step["parallel"])
        lines.append(plan_as_text(rendered))
    return "\n".join(lines)


def _sweep_lines(sweep: dict[str, Any]) -> list[str]:
    """A sweep step's objective, sampling and limits, and its first trials' parameters."""
    objective, algorithm = sweep["objective"], sweep["sampling_algorithm"]
    limits = ", ".join(f"{key} {value}" for key, value in sweep["limits"].items())
    lines = [
        f"  objective: {objective['goal']} {objective['primary_metric']}; sampling: {algorithm['type']}"
        + (f"; limits: {limits}" if limits else ""),
        "  its outputs are its best trial's; its first trials:",
    ]
    for trial in sweep["trials"]:
        parameters = " ".join(f"{name}={value}" for name, value in trial["parameters"].items())
        lines.append(f"    {trial['trial']}  {parameters}")
    if sweep.get("early_termination"):
        lines.append(f"  early termination: {sweep['early_termination'].get('type')}")
    lines.append(f"  the first trial's job ({sweep['trials'][0]['job']}):")
    return lines
