"""What every case needs: the interpreter, this checkout's distrun, the peers, sizes, a scratch folder."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.harness import Run, run_commands
from benchmarks.peers import Peers

PEER_NAMES = frozenset({"torchrun", "torchx"})
REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
WORKLOADS = Path(__file__).resolve().parent / "workloads"


@dataclass(frozen=True)
class Sizes:
    """How big each case is. `full` is the issue's; `tiny` only shows the harness works."""

    launch_ranks: tuple[int, ...] = (1, 8, 32)
    collective_ranks: int = 4
    failure_ranks: int = 4
    failure_after: float = 1.0  # rank 2 exits 1 after this many seconds
    survivor_life: float = 8.0  # a rank nobody stops ends by itself after this long
    term_delay: float = 1.0  # the slow rank's clean-up after SIGTERM
    peer_cap: float = 20.0  # a peer still running after this long is killed and counted as "never"
    log_ranks: int = 4
    log_bytes_per_rank: int = 50_000_000
    plan_nodes: int = 1024
    plan_per_node: int = 8
    tf_workers: int = 8192
    agent_ranks: int = 128
    agent_sleep: float = 5.0
    footprint_ranks: int = 8
    footprint_window: float = 10.0
    # B8's growth curves: rank counts of the sleeping gang, of the log writers, bytes in all.
    curve_ranks: tuple[int, ...] = (8, 32, 128, 512)
    curve_log_ranks: tuple[int, ...] = (4, 64)
    curve_log_bytes: int = 200_000_000
    curve_window: float = 5.0  # seconds the supervisor's idle CPU is measured over
    pipeline_steps: int = 20  # B10: steps in the chain and in the fan-out
    sweep_trials: int = 100  # B11: no-op trials of the sweep
    hang_ranks: tuple[int, ...] = (8, 64)  # B12: ranks of the hung job
    automl_budget: float = 60.0  # B15: the AutoML search's time budget, seconds
    automl_rows: int = 30_000  # B15: training rows of the synthetic table (Microsoft's has 29,999)
    spark_standalone: bool = True  # B16: also on a standalone cluster (its JVMs start in tens of seconds)
    spark_warmup: bool = True  # B16: a first sample of each method, not kept

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(
            launch_ranks=(1, 2),
            survivor_life=4.0,
            peer_cap=10.0,
            log_bytes_per_rank=200_000,
            plan_nodes=4,
            plan_per_node=2,
            tf_workers=8,
            agent_ranks=4,
            agent_sleep=1.0,
            footprint_ranks=2,
            footprint_window=1.0,
            curve_ranks=(2, 4),
            curve_log_ranks=(2, 4),
            curve_log_bytes=400_000,
            curve_window=1.0,
            spark_standalone=False,
            spark_warmup=False,
            pipeline_steps=3,
            sweep_trials=4,
            hang_ranks=(4,),
            automl_budget=5.0,
            automl_rows=3_000,
        )

    def up_to(self, max_ranks: int | None) -> Sizes:
        """The growth curves cut at `max_ranks` (a small machine cannot start 512 ranks usefully)."""
        if max_ranks is None:
            return self
        return replace(
            self,
            curve_ranks=tuple(n for n in self.curve_ranks if n <= max_ranks) or (max_ranks,),
            curve_log_ranks=tuple(n for n in self.curve_log_ranks if n <= max_ranks) or (max_ranks,),
        )


@dataclass
class Bench:
    peers: Peers
    sizes: Sizes
    scratch: Path
    reps_override: int | None = None
    log: Callable[[str], None] = print
    peer_names: frozenset[str] = PEER_NAMES
    raw_dir: Path | None = None  # where cases that keep raw figures (B8) write them as JSON
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def python(self) -> str:
        return self.peers.python

    def wants(self, peer: str) -> bool:
        """Whether this run measures that peer (`--peers`); TorchX also needs to be installed."""
        if peer == "torchx" and not self.peers.torchx:
            return False
        return peer in self.peer_names

    def reps(self, default: int) -> int:
        return self.reps_override if self.reps_override is not None else default

    def folder(self, prefix: str) -> Path:
        """A fresh folder under the scratch space."""
        path = self.scratch / f"{prefix}-{next(self._counter):04d}"
        path.mkdir(parents=True)
        return path

    # ------------------------------------------------------------ environments

    def base_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """What every measured command gets: temp files under scratch, peers on PATH, no colour."""
        env = dict(os.environ)
        for key in ("PYTHONPATH", "DISTRUN_HOME", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            env.pop(key, None)
        env["TMPDIR"] = str(self.scratch / "tmp")
        (self.scratch / "tmp").mkdir(exist_ok=True)
        env["PATH"] = self.peers.path_env(env.get("PATH", ""))
        env["NO_COLOR"] = "1"
        env.update(extra or {})
        return env

    def distrun_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This checkout's distrun (src/ first), with its own DISTRUN_HOME under scratch."""
        env = self.base_env(extra)
        env["PYTHONPATH"] = str(SRC)
        env["DISTRUN_HOME"] = str(self.scratch / "distrun-home")
        # The peers keep no metrics run: compare the launch alone (the MLflow run's own cost,
        # ~60 ms to create and ~60 ms to close on a loaded machine, is in the README).
        env.setdefault("DISTRUN_MLFLOW", "0")
        return env

    def run(
        self,
        what: str,
        argvs: list[list[str]],
        env: dict[str, str],
        *,
        cwd: Path | None = None,
        timeout: float = 120.0,
        expect: str = "ok",
    ) -> tuple[Run, Path]:
        """Run a sample with its output kept in a file; a sample that did not do its job stops the case.

        expect: "ok" (every command exits 0), "fail" (each exits non-zero or hits the cap) or "any".
        """
        folder = self.folder(what.replace(" ", "-"))
        output = folder / "output.txt"
        with output.open("wb") as handle:
            run = run_commands(argvs, env=env, cwd=cwd, stdout=handle, timeout=timeout)
        wrong = (expect == "ok" and not run.ok) or (expect == "fail" and any(code == 0 for code in run.returncodes))
        if wrong:
            tail = output.read_bytes()[-3000:].decode(errors="replace")
            raise CaseError(f"{what}: exit statuses {run.returncodes}, expected {expect}; output ends:\n{tail}")
        return run, output

    def distrun(self, *args: str) -> list[str]:
        return [self.python, "-m", "distrun", *args]

    def workload(self, name: str) -> str:
        return str(WORKLOADS / name)

    # ------------------------------------------------------------ job files

    def job_file(
        self,
        command: str,
        *,
        nodes: int = 1,
        per_node: int = 1,
        grace_period: float | None = None,
        env: dict[str, str] | None = None,
        distribution: dict[str, Any] | None = None,
    ) -> Path:
        """A job YAML (written as JSON, which is YAML) in a fresh folder."""
        job: dict[str, Any] = {
            "command": command,
            "resources": {"instance_count": nodes},
            "distribution": distribution or {"type": "pytorch", "process_count_per_instance": per_node},
        }
        if grace_period is not None:
            job["limits"] = {"grace_period": grace_period}
        if env:
            job["environment_variables"] = env
        path = self.folder("job") / "job.yml"
        path.write_text(json.dumps(job, indent=2))
        return path


class CaseError(RuntimeError):
    """A measured command did not do what the case needs: the case is reported as broken."""
