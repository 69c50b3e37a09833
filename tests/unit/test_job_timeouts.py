"""The timeouts that apply to a job, and the notes on which fires first (pure)."""

from __future__ import annotations

from distrun.plan.text import timeouts_text
from distrun.prepare.timeouts import job_timeouts, spec_timeouts, timeout_notes
from distrun.spec.models import JobLimits, JobSpec


def test_a_pytorch_job_shows_its_limits_its_framework_variables_and_gloos_default():
    env = {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "600", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OTHER": "x"}
    found = job_timeouts(JobLimits(timeout=3600, hang_timeout=120), "pytorch", env)
    assert [(t["name"], t["seconds"]) for t in found] == [
        ("limits.timeout", 3600),
        ("limits.hang_timeout", 120),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", None),
        ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", 600),
        ("gloo collective timeout", 1800),
    ]
    assert timeouts_text(found)[1:3] == [
        "limits.hang_timeout: 120 s (no output and no metric for this long: the job fails hung)",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING: 1 (the job's environment_variables)",
    ]
    assert timeout_notes(found) == [
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (600 s) is longer than limits.hang_timeout (120 s): distrun ends a hung "
        "collective first, with every process's stack (hang/stacks.txt)",
        "gloo collective timeout (1800 s) is longer than limits.hang_timeout (120 s): distrun ends a hung "
        "collective first, with every process's stack (hang/stacks.txt)",
    ]


def test_a_hang_timeout_past_the_job_timeout_is_said_to_never_fire():
    found = job_timeouts(JobLimits(timeout=100, hang_timeout=120), "pytorch", {})
    assert timeout_notes(found) == [
        "limits.hang_timeout (120 s) is not shorter than limits.timeout (100 s): limits.timeout fires first, "
        "and a hung job ends as a timeout, without its stacks"
    ]


def test_without_a_hang_timeout_nothing_is_noted_and_a_plain_job_has_only_limits():
    spec = JobSpec.model_validate({"command": "python x.py", "limits": {"timeout": 60}})
    found = spec_timeouts(spec)
    assert [(t["name"], t["seconds"]) for t in found] == [("limits.timeout", 60), ("limits.hang_timeout", None)]
    assert timeout_notes(found) == []
    assert (
        timeouts_text(found)[1]
        == "limits.hang_timeout: none (no output and no metric for this long: the job fails hung)"
    )
