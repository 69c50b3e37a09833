"""`${{inputs.NAME}}`, `${{outputs.NAME}}` and `$[[ ... ]]` in a job's command.

Substituted values are shell-quoted on purpose: a literal input such as `x; rm -rf ~` reaches
the program as one argument and can never inject shell syntax. Shell variables the command
itself writes (`$RANK`, `$NODE_RANK`) are left for the shell of each process to expand.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

_EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
_OPTIONAL = re.compile(r"\$\[\[(.*?)\]\]", re.DOTALL)
_REF = re.compile(r"^(inputs|outputs)\.([A-Za-z_][A-Za-z0-9_]*)$")


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
    `render_value`, or a path); every value is shell-quoted here.
    """
    table = {"inputs": inputs, "outputs": outputs}

    def block(match: re.Match[str]) -> str:
        body = match.group(1)
        for ref in _EXPR.finditer(body):
            parts = _REF.match(ref.group(1))
            if parts and parts.group(2) not in table[parts.group(1)]:
                return ""
        return body

    def substitute(match: re.Match[str]) -> str:
        parts = _REF.match(match.group(1))
        if not parts:
            return match.group(0)
        return shlex.quote(table[parts.group(1)][parts.group(2)])

    return _EXPR.sub(substitute, _OPTIONAL.sub(block, command))
