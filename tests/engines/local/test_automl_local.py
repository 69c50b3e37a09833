"""AutoML jobs on local compute: FLAML's search as the job's one process, a line per trial, each
trial a child run of the job's MLflow run, the best model an MLflow model that scores the test
data, and the leaderboard with the test data's metrics."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from distrun.store.index import JobIndex
from support.automl_data import CUSTOMER_COLUMNS, customers, write_mltable
from support.cli import distrun_cli
from support.mlflow_store import tracking_of

# Their tests share one module-scoped job run: on one worker, so that it runs once per suite.
pytestmark = pytest.mark.xdist_group("local_automl")

JOB = """\
$schema: https://azuremlsdk2.blob.core.windows.net/preview/0.0.1/autoMLJob.schema.json
type: automl
experiment_name: automl-local
task: classification
primary_metric: AUC_weighted
target_column_name: "y"
training_data: {path: ./train, type: mltable}
validation_data: {path: ./valid, type: mltable}
test_data: {path: ./test, type: mltable}
limits: {timeout_minutes: 0.1, max_trials: 3}
featurization:
  mode: custom
  transformer_params:
    imputer:
      - fields: ["balance"]
        parameters: {strategy: median}
training:
  allowed_training_algorithms: [light_gbm, logistic_regression, decision_tree]
  enable_vote_ensemble: true
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """One AutoML job, run to its end: the assertions below share it."""
    folder = tmp_path_factory.mktemp("automl")
    write_mltable(folder / "train", CUSTOMER_COLUMNS, customers(240, seed=1))
    write_mltable(folder / "valid", CUSTOMER_COLUMNS, customers(80, seed=2))
    write_mltable(folder / "test", CUSTOMER_COLUMNS, customers(80, seed=3))
    (folder / "job.yml").write_text(JOB, encoding="utf-8")
    home = folder / "home"
    result = distrun_cli(home, "run", str(folder / "job.yml"), env={"DISTRUN_MLFLOW": "1"}, timeout=240)
    return home, folder, result


def _record(home: Path) -> dict:
    (record,) = JobIndex(home / "jobs.db").list(10)
    return record.to_dict()


@pytest.mark.slow
def test_the_search_runs_as_a_job_and_says_a_line_per_trial(finished) -> None:
    home, _, result = finished
    assert result.returncode == 0, result.stdout + result.stderr
    record = _record(home)
    assert record["status"] == "Completed" and record["kind"] == "automl"  # recorded at submit as what it is
    trials = [line for line in result.stdout.splitlines() if "] trial " in line]
    assert 1 <= len(trials) <= 3 and all("AUC_weighted=" in line and "best so far" in line for line in trials)
    # What distrun cannot honour is said once, before the first trial.
    assert result.stdout.count("has no FLAML equivalent") == 1 and result.stdout.count("ensembles are not built") == 1
    assert "test data: AUC_weighted=" in result.stdout


@pytest.mark.slow
def test_the_best_model_registers_as_an_mlflow_model(finished) -> None:
    home, _, _ = finished
    job = _record(home)["name"]
    path = f"azureml://jobs/{job}/outputs/best_model"
    made = distrun_cli(home, "model", "create", "-n", "best", "-t", "mlflow_model", "-p", path, "-o", "json")
    assert made.returncode == 0, made.stderr
    registered = json.loads(made.stdout)
    assert registered["version"] == "1" and registered["type"] == "mlflow_model"
    assert (Path(registered["path"]) / "MLmodel").is_file()
    assert "best:1" in distrun_cli(home, "job", "show", job).stdout  # the job says what was registered from it


@pytest.mark.slow
def test_the_best_model_is_an_mlflow_model_that_scores_the_test_data(finished) -> None:
    home, folder, _ = finished
    import mlflow.pyfunc
    import pandas as pd

    job = home / "jobs" / _record(home)["name"]
    model = mlflow.pyfunc.load_model(str(job / "named-outputs" / "best_model"))
    test = pd.read_csv(folder / "test" / "data.csv")
    predicted = model.predict(test.drop(columns=["y"]))
    assert len(predicted) == len(test) and set(predicted) <= {"yes", "no"}
    board = json.loads((job / "named-outputs" / "leaderboard" / "leaderboard.json").read_text())
    best = board["best"]
    assert board["leaderboard"][0]["trial"] == best["trial"] and best["algorithm"] in ("LightGBM", "LogisticRegression")
    assert 0 <= board["test_metrics"]["AUC_weighted"] <= 1 and "accuracy" in board["test_metrics"]


@pytest.mark.slow
def test_each_trial_is_a_child_run_with_its_algorithm_hyperparameters_and_metrics(finished, tmp_path: Path) -> None:
    home, _, _ = finished
    from mlflow.tracking import MlflowClient

    record = _record(home)
    tracking = tracking_of(home, record["name"])
    client = MlflowClient(tracking_uri=tracking["tracking_uri"])
    parent = client.get_run(tracking["run_id"])
    children = client.search_runs(
        [tracking["experiment_id"]], filter_string=f"tags.mlflow.parentRunId = '{tracking['run_id']}'"
    )
    assert children and all(run.data.tags["algorithm"] in ("LightGBM", "LogisticRegression") for run in children)
    assert all(run.data.params and "AUC_weighted" in run.data.metrics for run in children)
    best = parent.data.tags["automl_best_child_run_id"]
    assert best in {run.info.run_id for run in children}
    history = client.get_metric_history(tracking["run_id"], "AUC_weighted")
    assert sorted(point.step for point in history) == list(range(len(children)))

    # As Azure ML's AutoML notebooks read it: the job's name is its run id, the best child run
    # holds the best model under outputs/.
    from mlflow.artifacts import download_artifacts

    assert client.get_run(record["name"]).data.tags["automl_best_child_run_id"] == best
    assert "AUC_weighted" in client.get_run(best).data.metrics
    local = Path(
        download_artifacts(
            run_id=best, artifact_path="outputs", dst_path=str(tmp_path), tracking_uri=tracking["tracking_uri"]
        )
    )
    assert sorted(p.name for p in local.iterdir()) == [
        "conda_env_v_1_0_0.yml",
        "engineered_feature_names.json",
        "featurization_summary.json",
        "mlflow-model",
        "model.pkl",
    ]
    named = home / "jobs" / record["name"] / "named-outputs" / "best_model"
    assert (local / "mlflow-model" / "MLmodel").read_bytes() == (named / "MLmodel").read_bytes()
    assert (local / "model.pkl").read_bytes() == (named / "model.pkl").read_bytes()
    assert "mlflow" in (local / "conda_env_v_1_0_0.yml").read_text()
    # The featurization as the notebooks print it: a record per training column, the features fit on.
    engineered = json.loads((local / "engineered_feature_names.json").read_text())
    summary = {row["RawFeatureName"]: row for row in json.loads((local / "featurization_summary.json").read_text())}
    assert sorted(summary) == sorted(name for name in CUSTOMER_COLUMNS if name != "y")
    assert all(summary[name]["Dropped"] == "No" and summary[name]["EngineeredFeatureCount"] == 1 for name in engineered)
    assert summary["balance"]["TypeDetected"] == "Numeric"


@pytest.mark.slow
def test_job_show_gives_the_leaderboard_and_names_the_best_trial(finished) -> None:
    home, _, _ = finished
    name = _record(home)["name"]
    shown = distrun_cli(home, "job", "show", name)
    board = json.loads((home / "jobs" / name / "named-outputs" / "leaderboard" / "leaderboard.json").read_text())
    best = board["best"]
    assert f"Best:     trial {best['trial']} {best['algorithm']} AUC_weighted={best['score']:.4f}" in shown.stdout
    assert shown.stdout.count("\n  trial ") == len(board["leaderboard"])
    assert "AutoML job: classification with FLAML" in shown.stdout
    as_json = json.loads(distrun_cli(home, "job", "show", name, "-o", "json").stdout)
    assert as_json["kind"] == "automl" and as_json["automl"]["best"]["trial"] == best["trial"]
    assert as_json["automl"]["best"]["score"] == best["score"]
    listed = distrun_cli(home, "job", "list").stdout
    assert name in listed and "local (automl)" in listed


@pytest.mark.slow
def test_distrun_plan_says_the_settings_it_cannot_honour_as_the_run_does(finished) -> None:
    home, folder, result = finished
    planned = distrun_cli(home, "plan", str(folder / "job.yml"))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    for said in ("ensembles are not built", "has no FLAML equivalent"):
        (line,) = [line for line in result.stdout.splitlines() if said in line]
        assert line.split("] ", 1)[1] in planned.stdout  # the run's note, word for word


@pytest.mark.slow
def test_the_web_uis_job_page_shows_the_leaderboard(finished) -> None:
    home, _, _ = finished
    from starlette.testclient import TestClient

    from distrun.store.layout import Layout
    from distrun.ui.app import UiSettings, create_app

    name = _record(home)["name"]
    board = json.loads((home / "jobs" / name / "named-outputs" / "leaderboard" / "leaderboard.json").read_text())
    app = create_app(UiSettings(layout=Layout(home), token="t0ken", allowed_hosts=()))
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        listed = client.get("/", params={"token": "t0ken"})
        assert listed.status_code == 200
        assert "AutoML job, " in client.get("/fragments/jobs").text  # the jobs list names its kind
        page = client.get(f"/jobs/{name}").text
    table = page[page.index('id="leaderboard"') : page.index("</table>", page.index('id="leaderboard"'))]
    assert table.count("<tr><td>") == len(board["leaderboard"])
    assert f"Best: trial {board['best']['trial']} {board['best']['algorithm']}" in page


@pytest.mark.slow
def test_an_artifact_store_out_of_reach_leaves_the_best_trials_run_without_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The best model stays the job's `best_model` output; the job does not fail for the copy."""
    from mlflow.tracking import MlflowClient

    from distrun.automl_search.trials import ChildRuns, Trial

    (tmp_path / "blocker").write_text("a file where the artifact folder would be", encoding="utf-8")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("e", artifact_location=(tmp_path / "blocker" / "artifacts").as_uri())
    parent = client.create_run(experiment).info.run_id
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    runs = ChildRuns(parent, "job", "accuracy")
    best = Trial(0, "LightGBM", "lgbm", 0.9, {"accuracy": 0.9}, {"n_estimators": 4}, 0.1)
    best.run_id = runs.record(best)
    model = tmp_path / "model"
    model.mkdir()
    for name in ("MLmodel", "model.pkl", "conda.yaml"):
        (model / name).write_text(name, encoding="utf-8")
    runs.finish(best, [best.row()], model, {"featurization_summary.json": "[]"})
    assert client.get_run(parent).data.tags["automl_best_child_run_id"] == best.run_id
    assert "note: the best trial's run has no outputs/" in capsys.readouterr().out
