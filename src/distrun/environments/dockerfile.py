"""A Dockerfile read as its instructions: pure text in, plain data out, nothing run.

Only what distrun needs to tell a Dockerfile of `pip install` steps from one that needs a
container engine: line continuations (a trailing backslash, or the character an `# escape=`
directive names), comment lines (also inside a continuation, as Docker drops them there),
the flags an instruction starts with (`COPY --from=build`, `RUN --mount=type=cache,...`), and
the two forms of arguments: JSON (`RUN ["pip", "install", "x"]`) and shell (`RUN pip install x`).
Each instruction keeps the line it starts on, so a refusal can name `Dockerfile:LINE`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (upper case), its arguments as written (continuations
    joined with a space), their JSON form when it was one, and the line it starts on."""

    keyword: str
    arguments: str
    json_form: tuple[str, ...] | None
    line: int
    flags: tuple[str, ...] = ()  # `--from=build`, `--mount=type=cache,...`: written before the arguments


def parse_dockerfile(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, in order."""
    escape = _escape_character(text)
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        stripped = line.lstrip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and (not stripped or stripped.startswith("#")):
            continue  # an empty or comment line inside a continuation is dropped, the instruction goes on
        if not pending:
            start = number
        if stripped.endswith(escape):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        instructions.append(_instruction(" ".join(part for part in pending if part), start))
        pending = []
    if pending:  # a continuation at the very end: Docker takes what was written
        instructions.append(_instruction(" ".join(part for part in pending if part), start))
    return instructions


def _escape_character(text: str) -> str:
    """The `# escape=` parser directive (only before the first instruction or comment), else `\\`."""
    for raw in text.splitlines():
        match = _DIRECTIVE.match(raw.strip())
        if match is None:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            return match.group(2)
    return "\\"


def _instruction(text: str, line: int) -> Instruction:
    keyword, _, arguments = text.partition(" ")
    arguments = arguments.strip()
    flags: list[str] = []
    while arguments.startswith("--"):
        flag, _, arguments = arguments.partition(" ")
        flags.append(flag)
        arguments = arguments.strip()
    return Instruction(keyword.upper(), arguments, _json_form(arguments), line, tuple(flags))


def _json_form(arguments: str) -> tuple[str, ...] | None:
    """`["a", "b"]` -> ("a", "b"); anything else (the shell form) -> None, as Docker decides."""
    if not arguments.startswith("["):
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None
