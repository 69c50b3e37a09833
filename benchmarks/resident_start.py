"""What `distrun run` of one `true` would take if its libraries were already loaded.

A projection for a design choice, not a mode distrun has: B1's fixed cost is mostly a fresh
Python process loading pydantic, ruamel.yaml, click and distrun's own modules. A resident
process (one per user, started once) would pay that once and fork a supervisor per job. This
script measures, samples alternating in one run:

- cold: `python -m distrun run job.yml`, a fresh process, as today;
- resident: a process that has imported distrun and built the job model's validators forks,
  and the child runs the same command's `main`; timed from the fork to the child's exit, so a
  client's own start and its messages to the resident process are NOT counted;
- floor: `benchmarks/workloads/library_floor.py 1 true`, a fresh process that imports the
  three libraries and starts the process (B1's "libraries' floor");
- client: a fresh `python -c "import socket"`, the least a Python client of a resident process
  would take to start; resident + client is the projection to set against cold.

    python -m benchmarks.resident_start --reps 15
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = ROOT / "benchmarks" / "workloads" / "library_floor.py"


def _cold(job: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "distrun", "run", str(job)], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _floor(true: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(FLOOR), "1", true], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _client(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import socket"], env=env, check=True)
    return time.perf_counter() - started


def _resident(job: Path) -> float:
    from distrun import cli

    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the supervisor a resident process would fork for one job
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            sys.argv = ["distrun", "run", str(job)]
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("the forked `distrun run` failed")
    return time.perf_counter() - started


def _load_once() -> None:
    """What a resident process holds: distrun's modules and the job model's validators, built."""
    from distrun.pydantic_plugins import skip_plugin_discovery

    skip_plugin_discovery()
    for name in ("distrun.cli", "distrun.submission", "distrun.backends.local", "distrun.agent.gang"):
        importlib.import_module(name)
    from distrun.spec import models

    models.JobSpec.model_validate({"command": "true"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="distrun-resident-") as scratch:
        work = Path(scratch)
        job = work / "job.yml"
        job.write_text(f"command: {true}\n")
        home = work / "home"
        os.environ.update({"DISTRUN_HOME": str(home), "DISTRUN_MLFLOW": "0"})
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
        sys.path.insert(0, str(ROOT / "src"))
        env = dict(os.environ)
        _cold(job, env)  # the first job of a DISTRUN_HOME creates its store: not counted
        _load_once()
        samples: dict[str, list[float]] = {"cold": [], "resident": [], "floor": [], "client": []}
        for _ in range(args.reps):
            samples["cold"].append(_cold(job, env))
            samples["resident"].append(_resident(job))
            samples["floor"].append(_floor(true, env))
            samples["client"].append(_client(env))
    print(f"`distrun run` of one `true`, {args.reps} samples each, alternating (s):")
    for name, values in samples.items():
        print(f"  {name:9} median {statistics.median(values):.3f}  min {min(values):.3f}  max {max(values):.3f}")
    cold, resident = statistics.median(samples["cold"]), statistics.median(samples["resident"])
    projected = resident + statistics.median(samples["client"])
    print(f"  resident + client: {projected:.3f} ({projected / cold:.2f} of cold)")


if __name__ == "__main__":
    main()
