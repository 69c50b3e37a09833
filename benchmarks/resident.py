"""A resident process (`distrun resident start`) for the cases that measure `distrun run` with one.

It serves a DISTRUN_HOME of its own under the scratch folder, so that the cold method's runs
(the bench's usual DISTRUN_HOME) never reach it. A case that needs a compute target defines it
in both homes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from benchmarks.bench import Bench

RESIDENT = "distrun, resident"  # `distrun run` handed to `distrun resident start`'s process
HOME = "resident-home"


def home_env(bench: Bench, extra: dict[str, str] | None = None) -> dict[str, str]:
    """distrun's environment (plus `extra`) with the resident's DISTRUN_HOME."""
    env = bench.distrun_env(extra)
    env["DISTRUN_HOME"] = str(bench.scratch / HOME)
    return env


def served_env(
    bench: Bench, extra: dict[str, str] | None = None, wrap: Callable[[list[str]], list[str]] = list
) -> dict[str, str]:
    """As `home_env`, with the resident started there if none serves it yet (at the first sample).

    `wrap`: how the commands it serves are run (say, inside a network namespace), so that the
    resident shares their context; one that differs would send every run cold.
    """
    env = home_env(bench, extra)
    if not (bench.scratch / HOME / "resident.sock").exists():
        subprocess.run(wrap(bench.distrun("resident", "start")), env=env, check=True, stdout=subprocess.DEVNULL)
    return env


def stop(bench: Bench) -> None:
    subprocess.run(bench.distrun("resident", "stop"), env=home_env(bench), stdout=subprocess.DEVNULL)
