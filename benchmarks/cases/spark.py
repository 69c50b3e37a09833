"""B16 Spark jobs: a small Spark job through `distrun run` beside the same job through
`spark-submit` directly, in local mode and on a Spark standalone cluster, in one run.

The job (workloads below) sums a range of 1000 numbers in 2 partitions. distrun runs it from a
`type: spark` job file (load, record, supervise, per-rank log, summary); the baseline is
`spark-submit` with the same master, settings and Python. The standalone cluster (one master,
two workers on 127.0.0.1: tests/support/clusters/spark_cluster.py) is started once for the case.
Figure: wall time from command start to command return, and distrun's difference. At full size
both are run once first, not kept, and their order is turned every other round (A B, B A).
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench import REPO, Bench, CaseError
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "Spark jobs: distrun run beside spark-submit, local mode and a standalone cluster"
TARGET_OVER = 0.5
WALL = "wall s"
OVER = "over spark-submit s"
CLUSTER_MODULE = REPO / "tests" / "support" / "clusters" / "spark_cluster.py"
APP = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("sum", spark.sparkContext.parallelize(range(1000), 2).sum(), flush=True)
spark.stop()
"""
CONF = {
    "spark.driver.cores": "1",
    "spark.driver.memory": "512m",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.executor.instances": "1",
    "spark.ui.showConsoleProgress": "false",
}


def _cluster_module() -> Any:
    """tests/support/clusters/spark_cluster.py; CaseError (the case is skipped) without pyspark or Java."""
    if importlib.util.find_spec("pyspark") is None:
        raise CaseError("pyspark is not installed (pip install 'distrun[spark]')")
    if shutil.which("java") is None:
        raise CaseError("no java on PATH (scripts/deps/65-spark.sh installs Java 17)")
    spec = importlib.util.spec_from_file_location("spark_test_cluster", CLUSTER_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _job(folder: Path, compute: str | None) -> Path:
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "app.py").write_text(APP)
    conf = "".join(f"  {k}: {v}\n" for k, v in CONF.items())
    target = f"compute: {compute}\n" if compute else ""
    (folder / "job.yml").write_text(f"type: spark\ncode: ./src\nentry:\n  file: app.py\nconf:\n{conf}{target}")
    return folder / "job.yml"


def _submit(folder: Path, home: Path, master: str, extra: dict[str, str]) -> list[str]:
    conf = [word for key, value in {**CONF, **extra}.items() for word in ("--conf", f"{key}={value}")]
    return [str(home / "bin" / "spark-submit"), "--master", master, *conf, str(folder / "src" / "app.py")]


def _measure(bench: Bench, result: CaseResult, case: str, distrun_argv: list[str], submit_argv: list[str]) -> None:
    home = Path(_cluster_module().spark_home())
    denv = bench.distrun_env()
    penv = bench.base_env({"SPARK_HOME": str(home), "PYSPARK_PYTHON": bench.python})
    # distrun's local mode binds to the loopback address only: so does the baseline
    if any(word.startswith("local[") for word in submit_argv):
        penv["SPARK_LOCAL_IP"] = "127.0.0.1"

    def sample(what: str, argv: list[str], env: dict[str, str]) -> dict[str, float]:
        run, output = bench.run(what, [argv], env, timeout=300)
        if "sum 499500" not in output.read_text(errors="replace"):
            raise CaseError(f"{what}: the job did not print its sum")
        return {WALL: run.wall}

    collected = alternate(
        [
            Method(DISTRUN, lambda: sample(f"b16-{case}-distrun", distrun_argv, denv)),
            Method("spark-submit", lambda: sample(f"b16-{case}-submit", submit_argv, penv)),
        ],
        bench.reps(3),
        bench.log,
        # Samples of 12-18 s spread by seconds with the machine's state: a first sample of each,
        # not kept, and the order turned every other round, so neither method always goes first.
        warmup=bench.sizes.spark_warmup,
        balanced=True,
    )
    ours, theirs = collected[DISTRUN].values[WALL], collected["spark-submit"].values[WALL]
    result.rows.append(Row(case, DISTRUN, WALL, ours))
    result.rows.append(Row(case, "spark-submit", WALL, theirs))
    over = statistics.median(ours) - statistics.median(theirs)
    result.rows.append(Row(case, DISTRUN, OVER, [over]))
    result.targets.append(
        Target("B16", f"{case}: distrun adds at most {TARGET_OVER:g} s", f"median {over:+.2f} s", over <= TARGET_OVER)
    )


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B16", TITLE)
    try:
        clusters = _cluster_module()
    except CaseError as exc:
        result.skipped = str(exc)
        return result
    folder = bench.folder("b16-job")
    local = _job(folder, None)
    _measure(
        bench,
        result,
        "local mode",
        bench.distrun("run", str(local)),
        _submit(folder, Path(clusters.spark_home()), "local[2]", {"spark.ui.port": "0"}),
    )
    result.reps[DISTRUN] = bench.reps(3)
    if not bench.sizes.spark_standalone:
        result.notes.append("--tiny: local mode only (the standalone cluster is measured at full size)")
        return result
    root = Path(tempfile.mkdtemp(prefix="distrun-b16-"))
    cluster = clusters.SparkCluster(root, workers=2).start()
    try:
        env = bench.distrun_env()
        settings = ["--set", f"master={cluster.master}", "--set", "driver_host=127.0.0.1"]
        create = bench.distrun("compute", "create", "--name", "b16pool", "--type", "spark", *settings)
        bench.run("b16 target", [create], env)
        standalone = _job(bench.folder("b16-job"), "b16pool")
        extra = {"spark.driver.host": "127.0.0.1", "spark.ui.port": "0"}
        _measure(
            bench,
            result,
            "standalone cluster (1 master, 2 workers)",
            bench.distrun("run", str(standalone)),
            _submit(standalone.parent, Path(clusters.spark_home()), cluster.master, extra),
        )
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    result.notes.append(
        "the same app, master and settings both ways; distrun also loads and checks the job file, records "
        "the job, keeps the driver's log and prints the summary. spark-submit itself starts two JVMs (its "
        "launcher, then the driver)"
    )
    return result
