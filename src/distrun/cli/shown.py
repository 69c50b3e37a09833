"""Every line the CLI prints for people goes through here: job names, display names,
descriptions, tags, parameters, metric names, data asset and environment names, reasons and
root causes are all text that a job file or a job's processes chose, and a terminal would obey
the escape sequences in them (OSC 52 writes the clipboard, CSI 2J clears the screen). They are
shown as the live stream shows a rank's output (`distrun.core.terminal_text`): colours kept,
every other control as caret text. JSON output needs nothing (`json` escapes every control
character), but goes through too, at the cost of one `translate`.
"""

from __future__ import annotations

from typing import Any

import click

from distrun.core.terminal_text import neutral_text


def echo(message: Any = None, nl: bool = True, err: bool = False) -> None:
    click.echo(None if message is None else neutral_text(str(message)), nl=nl, err=err)
