"""Checks that run on the document before it passed schema validation, so that one round of
errors holds every problem (a typo'd key no longer hides an undefined `${{inputs.x}}`)."""

from __future__ import annotations

from typing import Any

from distrun.core.errors import Problem
from distrun.loading import checks
from distrun.spec import models
from distrun.spec.source_map import SourceMap


def raw_problems(data: dict[str, Any], smap: SourceMap) -> list[Problem]:
    position = lambda *path: smap.find(tuple(path))  # noqa: E731
    problems: list[Problem] = []
    inputs, outputs, command = data.get("inputs"), data.get("outputs"), data.get("command")
    if isinstance(command, str):
        problems += checks.reference_problems(
            command,
            inputs if isinstance(inputs, dict) else {},
            outputs if isinstance(outputs, dict) else {},
            position,
        )
    code = data.get("code")
    if isinstance(code, str):
        windows = checks.windows_path_problem(code, "code", position)
        if windows is not None:
            problems.append(windows)
    problems += _unknown_distribution_keys(data.get("distribution"), smap)
    return problems


def _unknown_distribution_keys(dist: Any, smap: SourceMap) -> list[Problem]:
    """Under an unknown `distribution.type`, the keys no distribution type has (pydantic stops
    at the type and says nothing about them)."""
    if not isinstance(dist, dict) or str(dist.get("type", "")).lower() in models.DISTRIBUTION_MODELS:
        return []
    models_ = models.DISTRIBUTION_MODELS.values()
    known = sorted({f.alias or n for model in models_ for n, f in model.model_fields.items()})
    problems = []
    for key in dist:
        if key in known:
            continue
        import difflib  # error paths only: not loaded by a valid job's run

        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"remove it; distribution keys: {', '.join(known)}"
        path = ("distribution", key)
        problems.append(Problem(f"unknown key {str(key)!r}", f"distribution.{key}", smap.find(path), hint))
    return problems


def in_file_order(problems: list[Problem]) -> list[Problem]:
    """Problems as they appear in the file (then overrides, then the rest), each once."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for problem in problems:
        if (problem.key_path, problem.message) not in seen:
            seen.add((problem.key_path, problem.message))
            unique.append(problem)

    def where(problem: Problem) -> tuple[int, int, int]:
        pos = problem.position
        if pos is None or pos.line is None:
            return (2, 0, 0)
        return (1 if pos.source.startswith("--set") else 0, pos.line, pos.column or 0)

    return sorted(unique, key=where)
