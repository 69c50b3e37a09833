"""`python -m benchmarks`: run every case, print the table, write benchmarks/RESULTS.md.

python -m benchmarks                    # everything, full size (about 10 minutes on 2 cores)
python -m benchmarks --cases B1,B3      # some cases
python -m benchmarks --tiny --reps 1    # a tiny run that shows the harness works
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks import curves_report, machine
from benchmarks.bench import PEER_NAMES, REPO, SRC, Bench, CaseError, Sizes
from benchmarks.peers import find_peers
from benchmarks.results import ANALYSIS_MARKER, CaseResult, case_section, targets_summary

CASES = {
    "B1": "benchmarks.cases.launch",
    "B2": "benchmarks.cases.first_collective",
    "B3": "benchmarks.cases.failure",
    "B4": "benchmarks.cases.logs",
    "B5": "benchmarks.cases.plan_scale",
    "B6": "benchmarks.cases.footprint",
    "B7": "benchmarks.cases.slurm",
    "B8": "benchmarks.cases.curves",
    "B9": "benchmarks.cases.ray",
    "B10": "benchmarks.cases.pipelines",
    "B11": "benchmarks.cases.sweeps",
    "B12": "benchmarks.cases.hangs",
    "B13": "benchmarks.cases.first_metric",
    "B14": "benchmarks.cases.parallel",
    "B15": "benchmarks.cases.automl",
    "B16": "benchmarks.cases.spark",
}
DEFAULT_RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated, e.g. B1,B4 (default: all)")
    parser.add_argument("--reps", type=int, default=None, help="samples per method (default: per case)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: shows the harness works, measures little")
    parser.add_argument(
        "--peers",
        default=",".join(sorted(PEER_NAMES)),
        help="peers to measure besides the bare baselines: torchrun,torchx (default) or none",
    )
    parser.add_argument("--no-setup", action="store_true", help="do not install peers (TorchX) that are missing")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="where to write the report")
    parser.add_argument(
        "--max-ranks", type=int, default=None, help="B8: cut the growth curves at this many ranks (default: 512)"
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=Path(os.environ["DISTRUN_BENCH_RAW"]) if os.environ.get("DISTRUN_BENCH_RAW") else None,
        help="B8: folder for its raw figures as JSON (default: $DISTRUN_BENCH_RAW, else curves/raw beside --results)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (logs of every sample)")
    return parser.parse_args(argv)


def _startup_library_folders() -> list[str]:
    """The folders of the libraries `distrun run` imports at start (found, not imported)."""
    folders = []
    for name in ("ruamel.yaml", "pydantic", "pydantic_core", "annotated_types", "typing_inspection", "click", "rich"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            folders.extend(spec.submodule_search_locations)
    return folders


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = [key.strip().upper() for key in args.cases.split(",") if key.strip()]
    unknown = [key for key in wanted if key not in CASES]
    if unknown:
        print(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}", file=sys.stderr)
        return 2

    def log(text: str) -> None:
        print(text, flush=True)

    chosen = frozenset(p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "none")
    if chosen - PEER_NAMES:
        print(f"unknown peer(s) {', '.join(sorted(chosen - PEER_NAMES))}; known: torchrun, torchx", file=sys.stderr)
        return 2
    peers = find_peers(setup=not args.no_setup and "torchx" in chosen, log=log)
    # As `pip install` does: distrun's modules and the libraries it starts with are imported
    # from bytecode, not compiled at every start. This matters where PYTHONDONTWRITEBYTECODE is
    # set and the environment was made by an installer that writes no bytecode (uv by default):
    # there ruamel.yaml alone took 0.18 s of every start to compile, in distrun and in the
    # libraries' floor alike, which no user of a pip-installed distrun pays.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(SRC / "distrun"), *_startup_library_folders()],
        check=False,
    )
    facts = machine.describe(peers, REPO)
    scratch = Path(tempfile.mkdtemp(prefix="distrun-bench-"))
    sizes = (Sizes.tiny() if args.tiny else Sizes()).up_to(args.max_ranks)
    raw_dir = args.raw or curves_report.plots_for(args.results) / "raw"
    bench = Bench(peers, sizes, scratch, args.reps, log, chosen, raw_dir)
    log("distrun benchmarks: " + "; ".join(f"{k} {v}" for k, v in facts))
    for note in peers.notes:
        log(f"note: {note}")
    results: list[CaseResult] = []
    started = time.monotonic()
    try:
        for key in wanted:
            module = importlib.import_module(CASES[key])
            log(f"{key}: {module.TITLE}")
            case_started = time.monotonic()
            try:
                result = module.run(bench)
            except CaseError as exc:
                result = CaseResult(key, module.TITLE, skipped=f"broken: {exc}")
            except Exception:  # a bug in one case must not lose the others' figures
                result = CaseResult(key, module.TITLE, skipped="crashed:\n\n```text\n" + traceback.format_exc() + "```")
            if result.skipped:
                log(f"{key} skipped: {result.skipped}")
            log(f"{key} took {time.monotonic() - case_started:.1f} s")
            results.append(result)
    finally:
        if args.keep:
            log(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    report = render(results, facts, peers.notes, args, elapsed)
    print()
    print(report)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    old = args.results.read_text() if args.results.exists() else ""
    args.results.write_text(report + curves_report.kept_block(old) + kept_analysis(args.results))
    log(f"written: {args.results}")
    if "B8" in wanted and (raw_dir / curves_report.RAW_NAME).exists():
        log(curves_report.publish(raw_dir, args.results, curves_report.plots_for(args.results)))
    return 0


def kept_analysis(path: Path) -> str:
    """The hand-written part of an existing report, from the marker on ('' if there is none)."""
    if not path.exists():
        return ""
    text = path.read_text()
    at = text.find(ANALYSIS_MARKER)
    return "\n" + text[at:] if at >= 0 else ""


def render(
    results: list[CaseResult],
    facts: list[tuple[str, str]],
    notes: tuple[str, ...],
    args: argparse.Namespace,
    elapsed: float,
) -> str:
    lines = ["# distrun benchmark results", ""]
    lines.append(
        "Written by `python -m benchmarks`"
        + (" --tiny (sizes too small to mean anything)" if args.tiny else "")
        + ". Medians, minima and maxima of alternating samples (A B A B ...); the ratio is "
        "distrun's median over the peer's (below 1: distrun is faster)."
    )
    lines.append("")
    lines += [f"- {key}: {value}" for key, value in facts]
    lines.append(f"- load average at end: {machine.load_average()}")
    lines.append(f"- whole run: {elapsed:.0f} s")
    lines += [f"- note: {note}" for note in notes]
    lines.append("")
    lines += ["## Targets", "", *targets_summary(results), ""]
    for result in results:
        lines += case_section(result)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.exit(main())
