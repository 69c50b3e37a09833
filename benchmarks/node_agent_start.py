"""A node agent's own start: from starting `python -m distrun.agent.node` to its rank's exec.

This is distrun's share of a cluster node's start (Slurm's srun, a Kubernetes pod and a Ray
actor each start one agent per node), measured without the engine's scheduling noise: the
engine-free agent runs a prepared one-node job whose command stamps the time it starts
(`$EPOCHREALTIME`, a bash builtin, so no interpreter start is counted on the rank's side). The
bare baseline starts the same `bash -c` directly. Several source trees can be compared side by
side (e.g. before and after a change), samples alternating:

    python -m benchmarks.node_agent_start --src src --src /tmp/before/src --reps 15
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAMP = "stamp.txt"
COMMAND = f'echo "$EPOCHREALTIME" > "$DISTRUN_JOB_DIR/{STAMP}"'

# Run with the tree's own distrun: prepares `count` one-node jobs and writes each one's facts.
_PREPARE = """
import json, sys
from pathlib import Path
from distrun.agent.node_facts import NodeFacts
from distrun.prepare.compute import resolve_target
from distrun.loading.loader import load_job_data
from distrun.store.layout import Layout
from distrun.prepare.submission import prepare_job

work, count, command = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
layout = Layout()
target = resolve_target("local", layout.config_path)
for index in range(count):
    loaded = load_job_data({"command": command}, work, "job.yml")
    prepared = prepare_job(loaded, layout, target, f"agent_start_{index}")
    facts = NodeFacts(node_rank=0, node_names=("node0",), addresses=("127.0.0.1",), master_port=29999,
                      task_ports=(), job_dir=prepared.folder.root, engine="local", engine_job_id=str(index))
    data = facts.to_dict()
    del data["base_env"]
    (work / f"facts_{index}.json").write_text(json.dumps(data))
"""


def _env(src: Path, home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "DISTRUN_HOME": str(home), "DISTRUN_MLFLOW": "0"}


def prepare(src: Path, work: Path, count: int) -> None:
    work.mkdir(parents=True)
    # As `pip install` does: a tree without bytecode would be compiled again at every start.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [sys.executable, "-c", _PREPARE, str(work), str(count), COMMAND],
        env=_env(src, work / "home"),
        check=True,
        cwd=work,
    )


def agent_sample(src: Path, work: Path, index: int) -> float:
    """Seconds from starting the agent to its rank's stamp."""
    facts = work / f"facts_{index}.json"
    job_dir = Path(json.loads(facts.read_text())["job_dir"])
    started = time.time()
    subprocess.run(
        [sys.executable, "-m", "distrun.agent.node", "--facts", str(facts), "--channel", str(work / f"ch_{index}")],
        env=_env(src, work / "home"),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return float((job_dir / STAMP).read_text()) - started


def bare_sample(work: Path, index: int) -> float:
    stamp = work / f"bare_{index}"
    stamp.mkdir()
    started = time.time()
    subprocess.run(["bash", "-c", COMMAND], env={**os.environ, "DISTRUN_JOB_DIR": str(stamp)}, check=True)
    return float((stamp / STAMP).read_text()) - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.node_agent_start", description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, action="append", required=True, help="a distrun source tree (repeat)")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agent-start-") as scratch:
        works = [Path(scratch) / f"tree{k}" for k in range(len(args.src))]
        for src, work in zip(args.src, works, strict=True):
            prepare(src.resolve(), work, args.reps)
        samples: dict[str, list[float]] = {"bare bash -c": []} | {str(src): [] for src in args.src}
        for rep in range(args.reps):
            samples["bare bash -c"].append(bare_sample(Path(scratch), rep))
            for src, work in zip(args.src, works, strict=True):
                samples[str(src)].append(agent_sample(src.resolve(), work, rep))
    bare = statistics.median(samples["bare bash -c"])
    print(f"node agent start to its rank's exec, {args.reps} samples each, alternating (s)")
    print(f"{'what':<40} {'median':>8} {'min':>8} {'max':>8} {'minus bare':>11}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<40} {median:8.3f} {min(values):8.3f} {max(values):8.3f} {median - bare:+11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
