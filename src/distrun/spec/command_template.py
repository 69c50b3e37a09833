"""`${{inputs.NAME}}`, `${{outputs.NAME}}` and `$[[ ... ]]` in a job's command.

A substituted value never becomes shell syntax and reaches the program as exactly its text,
whatever quoting the command puts it in: bare it is one quoted word (`x; rm -rf ~` is one
argument), inside the command's own "double" or 'single' quotes it is written for those quotes
(`--pattern "${{inputs.p}}"` gives the program the pattern, with no quotes added), as on Azure ML.
Shell variables the command itself writes (`$RANK`, `$NODE_RANK`) are left for the shell of
each process to expand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from distrun.core.errors import DistrunError
from distrun.spec.shell_context import UnsafePlacement, contexts, escape_value

_EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
_OPTIONAL = re.compile(r"\$\[\[(.*?)\]\]", re.DOTALL)
_REF = re.compile(r"^(inputs|outputs)\.([A-Za-z_][A-Za-z0-9_]*)$")


class UnsafeValueError(DistrunError):
    """A value the command puts where the shell would read it as code (see `shell_context`)."""


@dataclass(frozen=True)
class Reference:
    kind: str  # "inputs" | "outputs"
    name: str
    optional: bool  # inside a $[[ ]] block


def references(command: str) -> tuple[list[Reference], list[str]]:
    """The input/output references in a command, and expressions distrun does not know."""
    refs: list[Reference] = []
    unknown: list[str] = []
    spans = [(m.start(), m.end()) for m in _OPTIONAL.finditer(command)]
    for match in _EXPR.finditer(command):
        inside = any(a <= match.start() < b for a, b in spans)
        ref = _REF.match(match.group(1))
        if ref:
            refs.append(Reference(ref.group(1), ref.group(2), inside))
        else:
            unknown.append(match.group(0))
    return refs, unknown


def render_value(value: object) -> str:
    """How a literal input reads in a command: booleans as Azure ML writes them."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def render_command(command: str, inputs: Mapping[str, str], outputs: Mapping[str, str]) -> str:
    """Substitute references; drop each `$[[ ]]` block whose inputs are not all given.

    `inputs` and `outputs` map names to their final text (a literal rendered by
    `render_value`, or a path); each value is written for the quoting context it stands in.
    Raises DistrunError for a value no writing makes safe where it stands (a comment,
    backticks, `${...}`, arithmetic) unless it is a plain word.
    """
    table = {"inputs": inputs, "outputs": outputs}

    def block(match: re.Match[str]) -> str:
        body = match.group(1)
        for ref in _EXPR.finditer(body):
            parts = _REF.match(ref.group(1))
            if parts and parts.group(2) not in table[parts.group(1)]:
                return ""
        return body

    text = _OPTIONAL.sub(block, command)
    found = [(m, _REF.match(m.group(1))) for m in _EXPR.finditer(text)]
    known = [(m, parts) for m, parts in found if parts]
    places = contexts(text, [m.span() for m, _ in known])
    pieces: list[str] = []
    last = 0
    for (match, parts), context in zip(known, places, strict=True):
        assert parts is not None
        value = table[parts.group(1)][parts.group(2)]
        try:
            written = escape_value(value, context)
        except UnsafePlacement:
            raise UnsafeValueError(
                f"the value of {parts.group(1)}.{parts.group(2)} ({value!r}) stands inside "
                f"{context.value} of the command, where the shell would read it as code",
                hint="put the reference outside it, bare or in \"double\" or 'single' quotes, where distrun "
                "hands the program exactly its text",
            ) from None
        pieces += [text[last : match.start()], written]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)
