"""The `distrun` command's entry point: a Ctrl-C while Python is still importing distrun
(the first few tenths of a second) ends quietly, like one a moment later; pydantic looks for
no plugins in the command's process (distrun.pydantic_plugins); the command ends without
Python's interpreter teardown where that is safe (distrun.process_exit); a `distrun run` is
handed to the resident process where one serves (distrun.resident)."""

from __future__ import annotations

import os
import sys

EXIT_INTERRUPTED = 130


def _through_resident() -> None:
    """Where `distrun resident start` left a process serving this DISTRUN_HOME, it runs the
    command (distrun.resident) and this process only relays; else this returns and the command
    runs here, cold."""
    from distrun.resident.client import run_through_resident

    code = run_through_resident(sys.argv[1:])
    if code is not None:
        os._exit(code)  # this process wrote nothing and holds nothing: no teardown is owed


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        _through_resident()
    from distrun.pydantic_plugins import skip_plugin_discovery

    skip_plugin_discovery()
    try:
        from distrun.cli import main as cli_main
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    from distrun.process_exit import leave

    try:
        cli_main()
    except SystemExit as done:
        leave(done.code)
    leave(0)
