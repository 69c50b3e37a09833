"""`-o/--output table|json|yaml`: one option, and one way to print, for every verb that shows or
lists (as `az ml`). `table` is for people; `json` and `yaml` carry the same data for scripts."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from distrun.cli.shown import echo
from distrun.cli.stdout_reader import let_go_of_stdout
from distrun.core.json_encoding import shown_json

OUTPUTS = ("table", "json", "yaml")


class _OutputChoice(click.Choice):
    """table, json or yaml; `text`, which some verbs once took, is read as table."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() == "text":
            value = "table"
        return super().convert(value, param, ctx)


def output_option(default: str = "table", what: str = "") -> Callable[[Any], Any]:
    """`--output/-o table|json|yaml`; `what` says what json and yaml hold."""
    said = f"json, yaml: {what}, for scripts." if what else "json, yaml: the same data, for scripts."
    return click.option(
        "--output",
        "-o",
        type=_OutputChoice(OUTPUTS),
        default=default,
        show_default=True,
        help=f"table: for people; {said}",
    )


def emit(data: Any, output: str, as_table: Callable[[], str]) -> None:
    """`data` as JSON or YAML, or `as_table()` for people."""
    if output == "json":
        echo_json(data)
    elif output == "yaml":
        echo(as_yaml(json.loads(json.dumps(data, default=str))))
    else:
        echo(as_table())


def echo_json(data: Any) -> None:
    # Indented for a user when small, compact when large (`shown_json`): a 1024 x 8 plan
    # indented took over 1 s in Python's pure-Python encoder, compact about 0.15 s in its C one.
    # Written in 1 MB pieces, so that a reader that goes away (`| head`) stops it early.
    text = shown_json(data)
    try:
        for start in range(0, len(text), 1 << 20):
            echo(text[start : start + (1 << 20)], nl=False)
        echo("")
    except BrokenPipeError:
        # The reader went away (`| head`): that is no error (distrun.cli.stdout_reader).
        let_go_of_stdout()
        sys.exit(0)


def as_yaml(data: Any) -> str:
    """YAML for people and scripts: multi-line text (tracebacks) as `|` blocks."""
    from ruamel.yaml import YAML
    from ruamel.yaml.scalarstring import LiteralScalarString

    def blocks(value: Any) -> Any:
        if isinstance(value, str) and "\n" in value:
            return LiteralScalarString(value)
        if isinstance(value, dict):
            return {str(k): blocks(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [blocks(v) for v in value]
        return value

    yaml = YAML()
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(blocks(data), out)
    return out.getvalue().rstrip("\n")
