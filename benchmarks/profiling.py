"""Profiles for RESULTS.md when a target is missed: where distrun's time goes.

- `cprofile`: a distrun command under cProfile (wall clock), the functions that took longest
  by their own time and, among distrun's, by cumulative time.
- `import_profile`: `python -X importtime` of a distrun command, summed by package: for
  commands whose cost is mostly the interpreter's start.
"""

from __future__ import annotations

import io
import pstats
import re
import subprocess
from collections import defaultdict

from benchmarks.bench import REPO, SRC, Bench

_SITE = re.compile(r"\S*/(site-packages|lib/python3\.\d+)/")


def _short(text: str) -> str:
    """Paths shortened to what matters: `distrun/...`, `benchmarks/...`, `pydantic/...`."""
    return _SITE.sub("", text.replace(str(SRC) + "/", "").replace(str(REPO) + "/", ""))


def cprofile(bench: Bench, args: list[str], env: dict[str, str], top: int = 15, script: str | None = None) -> str:
    """Run `python -m cProfile` of `distrun ARGS` (or of `SCRIPT ARGS`) once; its two tables as text."""
    out = bench.folder("profile") / "run.prof"
    # Not `-m distrun`: its entry point leaves without the teardown in which cProfile writes.
    target = [script or bench.workload("distrun_cli.py")]
    subprocess.run(
        [bench.python, "-m", "cProfile", "-o", str(out), *target, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=300,
    )
    if not out.exists():
        return "(the profiled command wrote no profile)"
    text = io.StringIO()
    stats = pstats.Stats(str(out), stream=text)
    text.write(f"by own time, top {top}:\n")
    stats.sort_stats("tottime").print_stats(top)
    text.write(f"distrun's functions by cumulative time, top {top}:\n")
    stats.sort_stats("cumulative").print_stats(r"distrun/(?!__main__)", top)
    kept = [
        line
        for line in text.getvalue().splitlines()
        if line.strip() and str(out) not in line and not line.lstrip().startswith(("Ordered by", "List reduced"))
    ]
    return _short("\n".join(kept))


def import_profile(bench: Bench, args: list[str], env: dict[str, str], top: int = 12) -> str:
    """Import time of a distrun command by top-level package (distrun by module)."""
    done = subprocess.run(
        [bench.python, "-X", "importtime", "-m", "distrun", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    own: dict[str, int] = defaultdict(int)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line.split("|")
        name = parts[2].strip()
        group = name if name.startswith("distrun") else name.split(".")[0]
        own[group] += int(parts[0].split(":")[1])
    total = sum(own.values())
    rows = sorted(own.items(), key=lambda item: -item[1])[:top]
    lines = [f"all imports: {total / 1000:.0f} ms (own time, summed by package; distrun by module)"]
    lines += [f"{us / 1000:8.1f} ms  {name}" for name, us in rows]
    return "\n".join(lines)
