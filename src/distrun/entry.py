"""The `distrun` command's entry point: a Ctrl-C while Python is still importing distrun
(the first few tenths of a second) ends quietly, like one a moment later."""

from __future__ import annotations

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from distrun.cli import main as cli_main
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None
    cli_main()
