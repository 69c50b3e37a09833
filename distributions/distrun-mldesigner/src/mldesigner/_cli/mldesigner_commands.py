"""`mldesigner execute --source FILE --name NAME --inputs k=v ... --outputs k=path ...`: run one
component of a Python file in its step. The module and `main` are where Microsoft's mldesigner
has its command's entry, so a component's command names the same entry whichever is installed."""

from __future__ import annotations

import argparse
import sys


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"mldesigner execute: {flag} takes name=value, got {item!r}")
        pairs[key] = value
    return pairs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mldesigner", description="Run a component of a Python file (distrun).")
    commands = parser.add_subparsers(dest="action", required=True)
    run = commands.add_parser("execute", help="run one component of a Python file with these inputs and outputs")
    run.add_argument("--source", required=True, help="the Python file holding the component")
    run.add_argument("--name", default=None, help="the component's name (default: the file's first)")
    run.add_argument("--inputs", nargs="*", default=[], help="name=value ...")
    run.add_argument("--outputs", nargs="*", default=[], help="name=path ...")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from distrun.sdk.designer import execute

    execute(args.source, args.name, _pairs(args.inputs, "--inputs"), _pairs(args.outputs, "--outputs"))
