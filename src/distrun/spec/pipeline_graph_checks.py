"""A pipeline's problems as a graph of built steps: a pipeline output written by two steps, and
steps that read each other's outputs in a cycle. Pure, on `PipelineStep`s."""

from __future__ import annotations

from distrun.core.errors import Problem
from distrun.spec import pipeline_graph
from distrun.spec.loaded_pipeline import PipelineStep


def pipeline_output_problems(steps: dict[str, PipelineStep]) -> list[Problem]:
    """Each pipeline output is written by one step."""
    problems = []
    writer: dict[str, str] = {}
    for name, step in steps.items():
        for output, pipeline_output in step.pipeline_outputs.items():
            if pipeline_output in writer:
                first = writer[pipeline_output]
                problems.append(
                    Problem(
                        f"pipeline output {pipeline_output!r} is already the output of step {first!r}",
                        f"{step.key}.outputs.{output}",
                        step.source_map.find(("outputs", output)),
                        "bind each pipeline output to one step's output",
                    )
                )
            else:
                writer[pipeline_output] = name
    return problems


def cycle_problems(steps: dict[str, PipelineStep]) -> list[Problem]:
    cycle = pipeline_graph.find_cycle({name: step.depends_on for name, step in steps.items()})
    if cycle is None:
        return []
    first, second = cycle[0], cycle[1]
    step = steps[first]
    reading = next(name for name, up in step.upstream.items() if up.step == second)
    return [
        Problem(
            f"the steps form a cycle: {' -> '.join(reversed(cycle))} (each reads the output of the one before)",
            f"{step.key}.inputs.{reading}",
            step.source_map.find(("inputs", reading)),
            "a step can read only outputs of steps that do not read, directly or through others, from it",
        )
    ]
