"""The timeouts that apply to a job, and which fires first: shown by `distrun plan`, kept in the record.

distrun's own: `limits.timeout` (the job fails when reached) and `limits.hang_timeout` (no output
and no metric for that long: the job fails hung, with every stack). The framework's: what the
job's environment variables set (TORCH_NCCL_*TIMEOUT*, NCCL_TIMEOUT, TORCH_NCCL_ASYNC_ERROR_HANDLING,
...), and for a pytorch job torch's default collective timeout for gloo (30 min), which a
process group created with `init_process_group(timeout=...)` replaces (distrun cannot see that).
"""

from __future__ import annotations

import re
from typing import Any

GLOO_DEFAULT_SECONDS = 1800.0
# Framework settings about collectives' timeouts and what happens when one passes.
_FRAMEWORK_VARIABLE = re.compile(
    r"(?:TORCH_NCCL_|NCCL_|TORCH_GLOO_|GLOO_|TORCH_DIST_)\w*TIMEOUT\w*|NCCL_TIMEOUT"
    r"|(?:TORCH_)?NCCL_ASYNC_ERROR_HANDLING|(?:TORCH_)?NCCL_BLOCKING_WAIT"
)


def job_timeouts(limits: Any, distribution_type: str | None, environment: dict[str, str]) -> list[dict[str, Any]]:
    """Each timeout as {"name", "seconds" (None: no limit, or not a number of seconds), "value", "source"}."""
    found: list[dict[str, Any]] = [
        _entry("limits.timeout", limits.timeout, "the job fails when reached"),
        _entry("limits.hang_timeout", limits.hang_timeout, "no output and no metric for this long: the job fails hung"),
    ]
    for name in sorted(environment):
        if _FRAMEWORK_VARIABLE.fullmatch(name):
            value = environment[name]
            seconds = _seconds(name, value)
            found.append(
                {"name": name, "seconds": seconds, "value": value, "source": "the job's environment_variables"}
            )
    if distribution_type == "pytorch":
        found.append(
            {
                "name": "gloo collective timeout",
                "seconds": GLOO_DEFAULT_SECONDS,
                "value": "30 min",
                "source": "torch's default for gloo, unless init_process_group(timeout=...) sets another",
            }
        )
    return found


def timeout_notes(timeouts: list[dict[str, Any]]) -> list[str]:
    """What the user should know about the order in which the timeouts fire."""
    by_name = {t["name"]: t["seconds"] for t in timeouts}
    job, hang = by_name.get("limits.timeout"), by_name.get("limits.hang_timeout")
    notes = []
    if hang is not None and job is not None and hang >= job:
        notes.append(
            f"limits.hang_timeout ({hang:g} s) is not shorter than limits.timeout ({job:g} s): limits.timeout fires "
            "first, and a hung job ends as a timeout, without its stacks"
        )
    if hang is not None and (job is None or hang < job):
        longer = [t for t in timeouts if not t["name"].startswith("limits.") and (t["seconds"] or 0) > hang]
        for framework in longer:
            notes.append(
                f"{framework['name']} ({framework['seconds']:g} s) is longer than limits.hang_timeout ({hang:g} s): "
                "distrun ends a hung collective first, with every process's stack (hang/stacks.txt)"
            )
    return notes


def _entry(name: str, seconds: float | None, source: str) -> dict[str, Any]:
    return {"name": name, "seconds": seconds, "value": None if seconds is None else f"{seconds:g}", "source": source}


def _seconds(name: str, value: str) -> float | None:
    """A variable's value in seconds, where its name says the unit (`..._SEC`, `..._MS`); None otherwise."""
    try:
        number = float(value)
    except ValueError:
        return None
    if name.endswith(("_SEC", "_SECS", "_SECONDS")):
        return number
    if name.endswith("_MS"):
        return number / 1000
    return None


def spec_timeouts(spec: Any) -> list[dict[str, Any]]:
    """`job_timeouts` of a validated job (`distrun.spec.models.JobSpec`)."""
    return job_timeouts(spec.limits, spec.distribution_type, dict(spec.environment_variables or {}))
