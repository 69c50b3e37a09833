"""Names distrun derives, checked before anything is recorded: everything `run` would refuse,
`job validate` and `plan` refuse first.

A pipeline's step runs as the job PIPELINE.STEP, a sweep's trial as SWEEP.trial_N, a pipeline's
sweep step's trial as PIPELINE.STEP.trial_N: each a job folder, at most 255 characters. These
were checked only when a step or trial started, so a pipeline was recorded and then failed for a
name the user never wrote, and `run --name a/b` recorded a pipeline named a/b. Now the loaders
check them with the file's `name` (or a name as long as any distrun generates) and `run --name`
with its name, each at file:line or at --name, and nothing is recorded.
"""

from __future__ import annotations

import itertools

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_file
from distrun.prepare import submission
from distrun.spec.derived_names import GENERATED_NAME_MAX, MAX_JOB_NAME
from support.reliability import assert_refused, run_capped

VERBS = (("job", "validate", "-f"), ("plan",), ("run",))
COMMAND_STEP = "jobs:\n  train:\n    type: command\n    command: echo hi\n"


def sweep_yaml(name: str | None, trials: int | str) -> str:
    return (
        "type: sweep\n"
        + (f"name: {name}\n" if name else "")
        + "trial:\n"
        + "  command: echo ${{search_space.x}}\n"
        + "search_space:\n"
        + "  x: {type: choice, values: [1, 2]}\n"
        + "objective: {goal: maximize, primary_metric: acc}\n"
        + f"limits: {{max_total_trials: {trials}}}\n"
    )


def test_a_pipeline_name_that_makes_a_step_name_too_long_is_refused_by_every_verb(distrun_home, tmp_path):
    name = "p" * 250  # a valid job name; p...p.train is 256 characters
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(f"type: pipeline\nname: {name}\n{COMMAND_STEP}")
    for verb in VERBS:
        done = run_capped(distrun_home, *verb, str(pipeline), timeout=120)
        assert_refused(done, f"{pipeline}:2:1: name: step 'train' runs as the job", "256 characters", "at most 249")
    assert not (distrun_home / "jobs").exists()  # nothing recorded


def test_a_sweep_name_whose_last_trials_are_too_long_is_refused_by_every_verb(distrun_home, tmp_path):
    """trial_0 to trial_9 fit in 255 characters; trial_10 and trial_11 do not."""
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml("s" * 247, 12))
    for verb in VERBS:
        done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
        assert_refused(done, f"{sweep}:2:1: name: trial 'trial_11' runs as the job", "256 characters")
    assert not (distrun_home / "jobs").exists()


def test_a_sweep_without_a_name_and_more_trials_than_names_can_count_is_refused(distrun_home, tmp_path):
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml(None, "1" + "0" * 250))
    for verb in VERBS[:2]:
        done = run_capped(distrun_home, *verb, str(sweep), timeout=120)
        assert_refused(done, f"{sweep}:7:", "limits.max_total_trials:", "lower limits.max_total_trials")


def test_a_grid_sweep_counts_its_combinations_not_its_trial_limit(distrun_home, tmp_path):
    """Two choices give trial_0 and trial_1 only: a 247-character name fits, whatever max_total_trials says."""
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(sweep_yaml("g" * 247, 1000).replace("objective:", "sampling_algorithm: grid\nobjective:"))
    done = run_capped(distrun_home, "job", "validate", "-f", str(sweep), timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_pipeline_sweep_steps_trial_names_count(distrun_home, tmp_path):
    (tmp_path / "train.yml").write_text("type: command\ninputs:\n  x: {type: integer}\ncommand: echo ${{inputs.x}}\n")
    name = "q" * 243  # q...q.tune is 248 characters, q...q.tune.trial_1 256
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(
        f"type: pipeline\nname: {name}\njobs:\n  tune:\n    type: sweep\n    trial: ./train.yml\n"
        "    search_space:\n      x: {type: choice, values: [1, 2]}\n"
        "    objective: {goal: maximize, primary_metric: acc}\n    limits: {max_total_trials: 2}\n"
    )
    for verb in VERBS:
        done = run_capped(distrun_home, *verb, str(pipeline), timeout=120)
        assert_refused(done, f"{pipeline}:2:1: name: step 'tune' runs as the job", ".tune.trial_1, 256 characters")
    assert not (distrun_home / "jobs").exists()


@pytest.mark.parametrize("kind", ["pipeline", "sweep"])
def test_run_name_is_checked_with_the_names_it_derives_before_anything_is_recorded(distrun_home, tmp_path, kind):
    job = tmp_path / f"{kind}.yml"
    job.write_text(f"type: pipeline\n{COMMAND_STEP}" if kind == "pipeline" else sweep_yaml(None, 2))
    done = run_capped(distrun_home, "run", str(job), "--name", "n" * 250, timeout=120)
    assert_refused(done, "--name: ", "runs as the job", "characters: a job name has at most 255")
    done = run_capped(distrun_home, "job", "create", "-f", str(job), "--name", "a/b", timeout=120)
    assert_refused(done, "--name: job name 'a/b' is not allowed")
    assert not (distrun_home / "jobs").exists()


def test_generated_names_fit_the_length_the_loaders_allow_for_them():
    longest = max(len(f"{a}_{n}_") for a, n in itertools.product(submission._ADJECTIVES, submission._NOUNS))
    assert longest + 8 <= GENERATED_NAME_MAX
    assert len(submission.generate_name()) <= GENERATED_NAME_MAX


def test_nested_steps_too_long_for_any_generated_name_are_refused_where_the_step_is(tmp_path):
    """Without a name in the file: OUTER.INNER.STEP with the longest name distrun generates."""
    outer, inner, step = "a" * 100, "b" * 100, "c" * (MAX_JOB_NAME - GENERATED_NAME_MAX - 203)
    (tmp_path / "inner.yml").write_text(f"type: pipeline\njobs:\n  {step}:\n    type: command\n    command: echo hi\n")
    (tmp_path / "outer.yml").write_text(
        f"type: pipeline\njobs:\n  {inner}:\n    type: pipeline\n    component: ./inner.yml\n"
    )
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(f"type: pipeline\njobs:\n  {outer}:\n    type: pipeline\n    component: ./outer.yml\n")
    assert list(load_pipeline_file(pipeline).steps) == [f"{outer}.{inner}.{step}"]  # 255 characters with the name
    (tmp_path / "inner.yml").write_text(f"type: pipeline\njobs:\n  {step}x:\n    type: command\n    command: echo hi\n")
    with pytest.raises(ValidationError) as refused:
        load_pipeline_file(pipeline)
    [problem] = refused.value.problems
    assert str(problem.position) == f"{tmp_path / 'inner.yml'}:3:3"
    assert problem.key_path == f"jobs.{step}x"
    assert "256 characters, more than a job name's 255" in problem.message
