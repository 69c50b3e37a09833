"""`--set inputs.NAME=...` / `--set outputs.NAME=...` for a name the job does not have.

A mapping of inputs takes any name, so a misspelt `--set inputs.factr=3` would add a new input
and leave the job running with the file's `factor`. An override may only address an input or
output the file declares, or one the (overridden) document uses as `${{inputs.NAME}}` (a
pipeline's steps: `${{parent.inputs.NAME}}`); any other is refused with the names it could have
meant, as unknown keys elsewhere are. A pipeline's inline step (`jobs.STEP.inputs.NAME`) is held
to the same rule; a step that names a component is checked against the component's inputs by
the pipeline loader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from distrun.core.errors import Problem, ValidationError
from distrun.spec.overrides import override_position, parse_override
from distrun.spec.source_map import KeyPath

PORTS = ("inputs", "outputs")
_REFERENCE = re.compile(r"\$\{\{\s*(parent\.)?(inputs|outputs)\.([A-Za-z0-9_\-]+)")
Loaded = TypeVar("Loaded")


def refusing_unknown_ports(before: Any, after: Any, overrides: Iterable[str], load: Callable[[], Loaded]) -> Loaded:
    """`load()`, its problems reported with those of overrides naming an unknown input or output."""
    refused = unknown_port_overrides(before, after, overrides)
    try:
        loaded = load()
    except ValidationError as exc:
        if not refused:
            raise
        # Reported after the rest (which are in file order), less what follows from the refused
        # override itself.
        raise ValidationError([*without_problems_under(exc.problems, refused), *refused]) from None
    if refused:
        raise ValidationError(refused)
    return loaded


def unknown_port_overrides(before: Any, after: Any, overrides: Iterable[str]) -> list[Problem]:
    """One problem per override that names an input or output that `before` (the document as
    written) does not declare and `after` (with every override applied) does not reference."""
    problems = []
    for text in overrides:
        path, _ = parse_override(text)
        scope = _scope(path, before)
        if scope is None:
            continue
        kind, name = str(path[len(scope)]), str(path[len(scope) + 1])
        # A pipeline's steps use its inputs as `parent.inputs.X`; a job or a step, as `inputs.X`.
        by_parent = scope == () and isinstance(after, dict) and "jobs" in after
        known = _known_names(_at(before, scope), _at(after, scope), kind, by_parent)
        if name in known:
            continue
        problems.append(_unknown(text, scope, kind, name, known))
    return problems


def _scope(path: KeyPath, before: Any) -> KeyPath | None:
    """The document (the top, or an inline pipeline step) whose inputs or outputs `path` names a
    key of; None for other keys and for `--set inputs={...}`, which replaces them all as written."""
    if len(path) >= 2 and path[0] in PORTS:
        return ()
    if len(path) >= 4 and path[0] == "jobs" and path[2] in PORTS:
        step = _at(before, path[:2])
        if not (isinstance(step, dict) and "component" in step):
            return path[:2]
    return None


def _at(document: Any, path: KeyPath) -> Any:
    for part in path:
        document = document.get(str(part)) if isinstance(document, dict) else None
    return document


def _known_names(before: Any, after: Any, kind: str, by_parent: bool) -> list[str]:
    declared = before.get(kind) if isinstance(before, dict) else None
    names = [str(key) for key in declared] if isinstance(declared, dict) else []
    for parent, found, name in (match.groups() for text in _strings(after) for match in _REFERENCE.finditer(text)):
        if bool(parent) == by_parent and found == kind and name not in names:
            names.append(name)
    return names


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _unknown(text: str, scope: KeyPath, kind: str, name: str, known: list[str]) -> Problem:
    singular = kind[:-1]
    where = ".".join(str(part) for part in (*scope, kind))
    import difflib  # an unknown name only: not on a valid job's run path

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    listed = ", ".join(known) if known else "none"
    if close:
        hint = f"did you mean {where}.{close[0]}? The job's {kind}: {listed}"
    else:
        hint = f"the job's {kind}: {listed}; declare a new {singular} under `{kind}:` in the file and use it"
    return Problem(
        f"unknown {singular} {name!r}: the job neither declares nor uses it",
        f"{where}.{name}",
        override_position(text),
        hint,
    )


def without_problems_under(problems: list[Problem], refused: list[Problem]) -> list[Problem]:
    """`problems` less those about a key a refused override addressed (they follow from it)."""
    paths = [problem.key_path for problem in refused]
    return [
        problem
        for problem in problems
        if not any(problem.key_path == path or problem.key_path.startswith(path + ".") for path in paths)
    ]
