"""The `distrun` command's entry point: a Ctrl-C while Python is still importing distrun
(the first few tenths of a second) ends quietly, like one a moment later; pydantic looks for
no plugins in the command's process (distrun.core.pydantic_plugins); the command ends without
Python's interpreter teardown where that is safe (distrun.core.process_exit)."""

from __future__ import annotations

EXIT_INTERRUPTED = 130


def main() -> None:
    from distrun.core.pydantic_plugins import skip_plugin_discovery

    skip_plugin_discovery()
    try:
        from distrun.cli.main import main as cli_main
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    from distrun.core.process_exit import leave

    try:
        cli_main()
    except SystemExit as done:
        leave(done.code)
    leave(0)
