"""A pipeline's own outputs, as its record keeps them: each one is an output of one of its steps.

A pipeline output (`outputs: {summary: ...}` bound by a step as `report: ${{parent.outputs.summary}}`)
has no folder of its own: it is the output `report` of the job that step ran as (a reused step's:
the earlier job whose outputs it has). The pipeline's record keeps, for each step, which of its
outputs are the pipeline's (`steps.STEP.pipeline_outputs`: step output -> pipeline output); this
module reads them back, so that `job show`, `job download --output-name`, the SDK and
`azureml://jobs/PIPELINE/outputs/NAME` all take the pipeline's output names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PipelineOutput:
    """The pipeline output `name`: the output `output` of step `step`, run as job `job`."""

    name: str
    step: str
    output: str
    job: str
    status: str

    def to_dict(self, pipeline: str) -> dict[str, str]:
        return {
            "step": self.step,
            "output": self.output,
            "job": self.job,
            "status": self.status,
            "path": f"azureml://jobs/{pipeline}/outputs/{self.name}",
        }


def pipeline_outputs(steps: dict[str, Any] | None) -> dict[str, PipelineOutput]:
    """The pipeline outputs a pipeline's recorded `steps` write, by name, in step order."""
    found: dict[str, PipelineOutput] = {}
    for step, state in (steps or {}).items():
        if not isinstance(state, dict):
            continue
        bound = state.get("pipeline_outputs")
        for output, name in bound.items() if isinstance(bound, dict) else ():
            found[str(name)] = PipelineOutput(
                str(name), str(step), str(output), str(state.get("job")), str(state.get("status"))
            )
    return found
