"""B15 AutoML: the bank-marketing classification job with a 60 s budget, against FLAML called
directly on the same data, split and budget.

distrun: `distrun run job.yml` of a `type: automl` job (training and validation MLTable folders,
accuracy, LightGBM/RandomForest/XGBoost/ExtremeRandomTrees/LogisticRegression, `timeout_minutes`
= the budget), the search as the job's one process, a line per trial, the best model saved as an
MLflow model and the leaderboard written. The peer: `benchmarks/workloads/flaml_direct.py`, the
same `AutoML().fit` on the same CSVs (validation table as holdout, same estimators, seed, early
stopping, cores), the model pickled. The figures: distrun's share of the wall time over FLAML's
own ((distrun - FLAML) / distrun) and the best validation accuracy of each.

The data is Microsoft's (`cli/jobs/basics/hello-automl` of azureml-examples) when the variable
AZUREML_EXAMPLES names a checkout of it; otherwise a synthetic table of the same size and shape
is written (said in the notes).
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

from benchmarks.bench import Bench, CaseError
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "AutoML search"
PEER = "FLAML directly"
WALL = "wall s"
ACCURACY = "best validation accuracy"
OVERHEAD = "distrun's share of the wall"
MAX_OVERHEAD = 0.10
MAX_ACCURACY_GAP = 0.02
EXAMPLE = Path("cli/jobs/basics/hello-automl")
MLTABLE = "paths:\n  - file: ./data.csv\ntransformations:\n  - read_delimited:\n      delimiter: ','\n"


def tables(bench: Bench) -> tuple[Path, Path, str]:
    """The training and validation MLTable folders (each `data.csv` beside its MLTable), and where they came from."""
    folder = bench.folder("b15-data")
    checkout = os.environ.get("AZUREML_EXAMPLES")
    sources = {}
    if checkout and (Path(checkout) / EXAMPLE).is_dir():
        base = Path(checkout) / EXAMPLE
        sources = {
            "train": next((base / "training-mltable-folder").glob("*.csv")),
            "valid": next((base / "validation-mltable-folder").glob("*.csv")),
        }
    for name, rows in (("train", bench.sizes.automl_rows), ("valid", max(200, bench.sizes.automl_rows // 15))):
        (folder / name).mkdir()
        (folder / name / "MLTable").write_text(MLTABLE)
        text = sources[name].read_text() if sources else _synthetic(rows, seed=len(name))
        (folder / name / "data.csv").write_text(text)
    rows = sum(1 for _ in (folder / "train" / "data.csv").open()) - 1
    where = "Microsoft's bank-marketing tables" if sources else "a synthetic table of the bank-marketing shape"
    where += f" ({rows} training rows)"
    return folder / "train", folder / "valid", where


def _synthetic(rows: int, seed: int) -> str:
    pick = random.Random(seed)
    lines = ["age,job,balance,duration,campaign,y"]
    for _ in range(rows):
        age, balance, duration = pick.randint(18, 90), pick.uniform(-1e3, 1e4), pick.expovariate(1 / 250)
        job, campaign = pick.choice(["admin", "blue-collar", "retired", "student", "technician"]), pick.randint(1, 9)
        score = duration / 400 + (age > 60) + (job == "student") * 0.5 - campaign * 0.1 + pick.gauss(0, 0.6)
        lines.append(f"{age},{job},{balance:.1f},{duration:.0f},{campaign},{'yes' if score > 1.4 else 'no'}")
    return "\n".join(lines) + "\n"


def job_file(folder: Path, budget: float) -> Path:
    job = {
        "type": "automl",
        "task": "classification",
        "primary_metric": "accuracy",
        "target_column_name": "y",
        "training_data": {"path": "./train", "type": "mltable"},
        "validation_data": {"path": "./valid", "type": "mltable"},
        "limits": {"timeout_minutes": budget / 60},
    }
    path = folder / "job.yml"
    path.write_text(json.dumps(job, indent=1))
    return path


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B15", TITLE)
    reps = bench.reps(1)
    budget = bench.sizes.automl_budget
    train, valid, where = tables(bench)
    yml = job_file(train.parent, budget)
    case = f"bank-marketing classification, {budget:g} s budget"

    def distrun() -> dict[str, float]:
        env = bench.distrun_env()
        home = bench.folder("b15-home")
        env["DISTRUN_HOME"] = str(home)
        done, _ = bench.run("b15-distrun", [bench.distrun("run", str(yml))], env, timeout=budget * 3 + 300)
        (job,) = (home / "jobs").iterdir()
        board = json.loads((job / "named-outputs" / "leaderboard" / "leaderboard.json").read_text())
        if not board.get("best"):
            raise CaseError(f"distrun's search named no best trial: {board}")
        return {WALL: done.wall, ACCURACY: float(board["best"]["score"])}

    def direct() -> dict[str, float]:
        out = bench.folder("b15-flaml") / "best.json"
        argv = [bench.python, bench.workload("flaml_direct.py"), str(train / "data.csv"), str(valid / "data.csv")]
        argv += ["y", str(budget), str(out)]
        done, _ = bench.run("b15-direct", [argv], bench.base_env(), timeout=budget * 3 + 300)
        return {WALL: done.wall, ACCURACY: float(json.loads(out.read_text())["best_accuracy"])}

    methods = [Method(DISTRUN, distrun), Method(PEER, direct)]
    bench.log(f"  B15 {case}")
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        for metric in (WALL, ACCURACY):
            result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
        result.reps[method.name] = reps
    pairs = zip(samples[DISTRUN].values[WALL], samples[PEER].values[WALL], strict=True)
    result.rows.append(Row(case, DISTRUN, OVERHEAD, [(mine - peer) / mine for mine, peer in pairs]))
    share = result.median(case, DISTRUN, OVERHEAD)
    gap = result.median(case, PEER, ACCURACY) - result.median(case, DISTRUN, ACCURACY)
    result.targets += [
        Target(
            "B15",
            f"distrun's overhead at most {MAX_OVERHEAD:.0%} of the wall time",
            f"{share:.1%} (median)",
            None if math.isnan(share) else share <= MAX_OVERHEAD,
        ),
        Target(
            "B15",
            f"best accuracy within {MAX_ACCURACY_GAP:.0%} of FLAML's own",
            f"{gap:+.4f} below FLAML's (median)",
            None if math.isnan(gap) else gap <= MAX_ACCURACY_GAP,
        ),
    ]
    result.notes += [
        f"data: {where}; the validation table is the holdout of both",
        "distrun: `distrun run job.yml` with tracking off (DISTRUN_MLFLOW=0, as every case), a DISTRUN_HOME per sample;"
        " the search ranks trials with Azure ML's metrics computed per trial and saves an MLflow model",
        "FLAML directly: the same fit (estimators, seed, early stopping, cores), FLAML's built-in accuracy,"
        " the model pickled",
        f"{OVERHEAD}: (distrun's wall - FLAML's wall) / distrun's wall, of samples taken side by side",
    ]
    return result
