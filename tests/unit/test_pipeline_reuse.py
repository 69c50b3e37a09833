"""Step reuse's pure parts: the key of a step (a command step's, a sweep step's), when a step may
be reused, and the content digest the key and the output check are made of (read in-process from
files written here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distrun.core.content_hash import content_digest
from distrun.core.safe_files import UnsafeFileError
from distrun.loading.pipeline_loader import load_pipeline_data
from distrun.runner.pipeline_reuse import pipeline_step_key
from distrun.spec.pipeline_reuse import hashed_paths, reuse_key, sweep_key_document, why_not_reused

STEP = {
    "command": "python train.py --data ${{inputs.data}} --epochs ${{inputs.epochs}}",
    "code": "/src/project",
    "environment": {"image": "python:3.11", "conda_file": "/src/conda.yml"},
    "inputs": {"data": {"type": "uri_folder", "path": "/data/raw"}, "epochs": 3},
    "outputs": {"model": {"type": "uri_folder"}},
    "resources": {"instance_count": 2},
    "distribution": {"type": "pytorch", "process_count_per_instance": 2},
    "display_name": "train",
    "compute": "local",
}
DIGESTS = {
    ("code",): "c0de",
    ("environment", "conda_file"): "c0da",
    ("inputs", "data", "path"): "da7a",
}


def _with(**changes: object) -> dict:
    return {**STEP, **changes}


def test_the_paths_a_key_hashes_by_content() -> None:
    assert hashed_paths(STEP) == {
        ("code",): "/src/project",
        ("environment", "conda_file"): "/src/conda.yml",
        ("inputs", "data", "path"): "/data/raw",
    }
    assert hashed_paths({"command": "echo", "environment": "azureml:env@latest", "inputs": {"n": 3}}) == {}


def test_the_key_is_the_same_for_the_same_work() -> None:
    key = reuse_key(STEP, DIGESTS)
    assert len(key) == 64 and key == reuse_key(dict(reversed(STEP.items())), DIGESTS)
    # Where it runs, what it is called and how it is described change nothing it computes.
    described = _with(display_name="other", compute="azureml:gpu", tags={"a": "b"}, experiment_name="e", name="n")
    assert reuse_key(described, DIGESTS) == key
    # Paths count by content: the same data elsewhere is the same input.
    moved = _with(inputs={"data": {"type": "uri_folder", "path": "/elsewhere"}, "epochs": 3}, code="/other")
    assert reuse_key(moved, DIGESTS) == key


@pytest.mark.parametrize(
    "change",
    [
        {"command": "python train.py --data ${{inputs.data}}"},
        {"inputs": {"data": {"type": "uri_folder", "path": "/data/raw"}, "epochs": 4}},
        {"inputs": {"data": {"type": "uri_file", "path": "/data/raw"}, "epochs": 3}},
        {"outputs": {"model": {"type": "uri_folder"}, "extra": {"type": "uri_folder"}}},
        {"environment": {"image": "python:3.12", "conda_file": "/src/conda.yml"}},
        {"resources": {"instance_count": 1}},
        {"distribution": {"type": "pytorch", "process_count_per_instance": 1}},
        {"environment_variables": {"SEED": "1"}},
    ],
    ids=["command", "literal-input", "input-type", "outputs", "environment", "resources", "distribution", "env-vars"],
)
def test_the_key_changes_with_what_the_step_computes(change: dict) -> None:
    assert reuse_key(_with(**change), DIGESTS) != reuse_key(STEP, DIGESTS)


@pytest.mark.parametrize("changed", list(DIGESTS))
def test_the_key_changes_with_the_content_of_each_path(changed: tuple[str, ...]) -> None:
    assert reuse_key(STEP, {**DIGESTS, changed: "0ther"}) != reuse_key(STEP, DIGESTS)


def test_a_path_without_a_digest_counts_by_its_text() -> None:
    url = _with(inputs={"data": {"type": "uri_folder", "path": "https://example.org/a.csv"}, "epochs": 3})
    other = _with(inputs={"data": {"type": "uri_folder", "path": "https://example.org/b.csv"}, "epochs": 3})
    assert reuse_key(url, {}) != reuse_key(other, {})


def test_when_a_step_is_not_reused() -> None:
    assert why_not_reused(True, False, False) is None
    assert why_not_reused(False, False, False) == "its component says is_deterministic: false"
    assert why_not_reused(True, True, False) == "the pipeline's settings.force_rerun is true"
    assert why_not_reused(True, False, True) == "the step's force_rerun is true"


def test_a_steps_force_rerun_and_determinism_load(tmp_path: Path) -> None:
    data = {
        "type": "pipeline",
        "jobs": {
            "again": {"command": "echo again", "force_rerun": True},
            "plain": {"command": "echo plain"},
            "random": {"component": {"command": "echo $RANDOM", "is_deterministic": False}},
        },
    }
    steps = load_pipeline_data(data, tmp_path).steps
    assert [(s.force_rerun, s.is_deterministic) for s in steps.values()] == [
        (True, True),
        (False, True),
        (False, False),
    ]
    assert "force_rerun" not in steps["again"].document  # the pipeline's key, not the command job's


# ---------------------------------------------------------------- sweep steps

TRIAL = {
    "$schema": "https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json",
    "type": "command",
    "name": "train",
    "version": "1",
    "command": "python train.py --data ${{inputs.data}} --x ${{inputs.x}} --model ${{outputs.model}}",
    "code": "./src",
    "environment": {"image": "python:3.11", "conda_file": "./conda.yml"},
    "inputs": {"data": {"type": "uri_folder"}, "x": {"type": "number", "default": 0}},
    "outputs": {"model": {"type": "uri_folder"}},
}
SWEEP = {
    "type": "sweep",
    "trial": "./train.yml",
    "display_name": "tune",
    "compute": "local",
    "inputs": {"data": {"type": "uri_folder", "path": "/data/raw"}},
    "outputs": {"model": {"type": "uri_folder"}},
    "search_space": {"x": {"type": "choice", "values": [1, 2]}},
    "sampling_algorithm": "grid",
    "objective": {"goal": "minimize", "primary_metric": "loss"},
    "early_termination": {"type": "bandit", "slack_factor": 0.1},
    "limits": {"max_total_trials": 2, "max_concurrent_trials": 2},
}
SWEEP_DIGESTS = {
    ("inputs", "data", "path"): "da7a",
    ("trial", "code"): "c0de",
    ("trial", "environment", "conda_file"): "c0da",
}


def _sweep_key(component: dict | None = None, digests: dict | None = None, **changes: object) -> str:
    document = sweep_key_document({**SWEEP, **changes}, component or TRIAL)
    return reuse_key(document, SWEEP_DIGESTS if digests is None else digests)


def test_a_sweep_steps_key_hashes_its_trials_paths_by_content() -> None:
    document = sweep_key_document(SWEEP, TRIAL)
    assert hashed_paths(document) == {
        ("trial", "code"): "./src",
        ("trial", "environment", "conda_file"): "./conda.yml",
        ("inputs", "data", "path"): "/data/raw",
    }


def test_a_sweep_steps_key_is_the_same_for_the_same_search() -> None:
    key = _sweep_key()
    # The trial's label (another file, a registered version) and its name, version and schema
    # do not change what its trials compute; nor the step's name, display name or compute.
    named = {**TRIAL, "name": "other", "version": "7", "$schema": "x", "display_name": "d", "tags": {"a": "b"}}
    assert _sweep_key(named, trial="azureml:train:7", display_name="t2", compute="azureml:gpu") == key
    moved = {**TRIAL, "code": "/elsewhere/src"}  # paths count by content
    assert _sweep_key(moved) == key


@pytest.mark.parametrize(
    "change",
    [
        {"search_space": {"x": {"type": "choice", "values": [1, 2, 3]}}},
        {
            "search_space": {
                "x": {"type": "choice", "values": [1, 2]},
                "y": {"type": "uniform", "min_value": 0, "max_value": 1},
            }
        },
        {"sampling_algorithm": "random"},
        {"sampling_algorithm": {"type": "random", "seed": 1}},
        {"sampling_algorithm": {"type": "random", "rule": "sobol"}},
        {"objective": {"goal": "maximize", "primary_metric": "loss"}},
        {"objective": {"goal": "minimize", "primary_metric": "val_loss"}},
        {"early_termination": {"type": "bandit", "slack_factor": 0.2}},
        {"early_termination": None},
        {"limits": {"max_total_trials": 3, "max_concurrent_trials": 2}},
        {"limits": {"max_total_trials": 2, "max_concurrent_trials": 2, "timeout": 60}},
        {"inputs": {"data": {"type": "uri_folder", "path": "/data/raw"}, "degree": 4}},
        {"outputs": {"model": {"type": "uri_folder"}, "extra": {"type": "uri_folder"}}},
    ],
    ids=[
        "space-values",
        "space-parameter",
        "sampling",
        "seed",
        "rule",
        "goal",
        "metric",
        "early-termination",
        "no-early-termination",
        "max-trials",
        "timeout",
        "literal-input",
        "outputs",
    ],
)
def test_a_sweep_steps_key_changes_with_its_search(change: dict) -> None:
    assert _sweep_key(**change) != _sweep_key()


@pytest.mark.parametrize(
    "trial",
    [
        {**TRIAL, "command": "python train.py --x ${{inputs.x}} --model ${{outputs.model}}"},
        {**TRIAL, "environment": {"image": "python:3.12", "conda_file": "./conda.yml"}},
        {**TRIAL, "inputs": {"data": {"type": "uri_folder"}, "x": {"type": "number", "default": 1}}},
        {**TRIAL, "environment_variables": {"SEED": "1"}},
        {**TRIAL, "resources": {"instance_count": 2}},
    ],
    ids=["command", "environment", "input-default", "env-vars", "resources"],
)
def test_a_sweep_steps_key_changes_with_its_trial_component(trial: dict) -> None:
    assert _sweep_key(trial) != _sweep_key()


@pytest.mark.parametrize("changed", list(SWEEP_DIGESTS))
def test_a_sweep_steps_key_changes_with_the_content_of_each_path(changed: tuple[str, ...]) -> None:
    assert _sweep_key(digests={**SWEEP_DIGESTS, changed: "0ther"}) != _sweep_key()


def _sweep_pipeline(folder: Path, trial_extra: str = "", step_extra: str = "") -> Path:
    """A pipeline whose sweep step's trial component is in a folder of its own (its code there)."""
    (folder / "comp" / "src").mkdir(parents=True, exist_ok=True)
    (folder / "comp" / "src" / "train.py").write_text("print('train')\n")
    (folder / "comp" / "train.yml").write_text(
        "type: command\ncommand: python train.py ${{inputs.x}} ${{outputs.model}}\ncode: ./src\n"
        "inputs: {x: {type: number}}\noutputs: {model: {type: uri_folder}}\n" + trial_extra
    )
    (folder / "pipeline.yml").write_text(
        "type: pipeline\njobs:\n  tune:\n    type: sweep\n    trial: ./comp/train.yml\n"
        "    outputs: {model: }\n    search_space: {x: {type: choice, values: [1, 2]}}\n"
        "    sampling_algorithm: grid\n    objective: {goal: minimize, primary_metric: loss}\n"
        "    limits: {max_total_trials: 2}\n" + step_extra
    )
    return folder / "pipeline.yml"


def test_a_sweep_steps_key_reads_its_trials_code_in_the_components_folder(tmp_path: Path) -> None:
    from distrun.loading.pipeline_loader import load_pipeline_file

    step = load_pipeline_file(str(_sweep_pipeline(tmp_path)), []).steps["tune"]
    home, code = tmp_path / "home", tmp_path / "comp" / "src"

    def key() -> str | None:
        return pipeline_step_key(step, step.bound_document(lambda up: ""), home)

    first = key()
    assert first is not None and key() == first
    (code / "train.py").write_text("print('changed')\n")
    assert key() not in (first, None)
    (code / "train.py").write_text("print('train')\n")
    assert key() == first
    # The trial's code folder gone: no key (the step runs, and its load says what is missing).
    (code / "train.py").unlink()
    code.rmdir()
    assert key() is None


def test_a_sweep_steps_determinism_and_force_rerun_load(tmp_path: Path) -> None:
    from distrun.loading.pipeline_loader import load_pipeline_file

    plain = load_pipeline_file(str(_sweep_pipeline(tmp_path / "plain")), []).steps["tune"]
    assert (plain.is_deterministic, plain.force_rerun) == (True, False)
    pipeline = _sweep_pipeline(tmp_path / "random", "is_deterministic: false\n", "    force_rerun: true\n")
    random = load_pipeline_file(str(pipeline), []).steps["tune"]
    assert (random.is_deterministic, random.force_rerun) == (False, True)
    assert "force_rerun" not in random.document  # the pipeline's key, not the sweep job's


# ---------------------------------------------------------------- content digests


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_folder_digest_is_its_names_and_contents(tmp_path: Path) -> None:
    files = {"a.txt": "alpha", "sub/b.txt": "beta", "sub/deeper/c.txt": "gamma"}
    one = content_digest(_tree(tmp_path / "one", files))
    assert content_digest(_tree(tmp_path / "two", files)) == one  # the same tree elsewhere
    assert content_digest(_tree(tmp_path / "three", {**files, "sub/b.txt": "BETA"})) != one
    assert content_digest(_tree(tmp_path / "four", {**files, "sub/b2.txt": "beta"})) != one
    renamed = dict(files)
    renamed["sub/b_renamed.txt"] = renamed.pop("sub/b.txt")
    assert content_digest(_tree(tmp_path / "five", renamed)) != one
    (tmp_path / "six").mkdir()
    _tree(tmp_path / "six", files)
    (tmp_path / "six" / "empty").mkdir()
    assert content_digest(tmp_path / "six") != one  # an empty folder is part of it
    assert content_digest(tmp_path / "one" / "a.txt") != content_digest(tmp_path / "one" / "sub" / "b.txt")


def test_a_digest_follows_no_link_on_the_way_and_never_blocks(tmp_path: Path) -> None:
    secret = _tree(tmp_path, {"secret.txt": "one"}) / "secret.txt"
    job = tmp_path / "job"
    out = _tree(job / "outputs" / "model", {"w.txt": "weights"})
    before = content_digest(out, root=job)
    (out / "link").symlink_to(secret)
    os.mkfifo(out / "pipe")  # opening it would wait for a writer
    with_link = content_digest(out, root=job)
    assert with_link != before
    secret.write_text("two")  # a link inside the tree counts by what it leads to: its target changed
    assert content_digest(out, root=job) != with_link
    # Below the job folder a link on the way, or at the end, is refused.
    (job / "linked").symlink_to(out)
    with pytest.raises(UnsafeFileError):
        content_digest(job / "linked", root=job)
    (job / "via").symlink_to(job / "outputs")
    with pytest.raises(UnsafeFileError):
        content_digest(job / "via" / "model", root=job)
    # A user's own data may itself be a link (to a data disk, say): followed at the top only.
    assert content_digest(job / "linked") == content_digest(out)


def test_a_code_digest_leaves_out_what_a_snapshot_leaves_out(tmp_path: Path) -> None:
    from distrun.store.snapshot import code_skip

    code = _tree(tmp_path / "src", {"train.py": "print(1)", ".amlignore": "*.log\n", "data/x.bin": "x"})
    before = content_digest(code, skip=code_skip(code))
    _tree(code, {"run.log": "noise", "__pycache__/train.pyc": "cache", ".git/HEAD": "ref"})
    assert content_digest(code, skip=code_skip(code)) == before
    (code / "train.py").write_text("print(2)")
    assert content_digest(code, skip=code_skip(code)) != before
