"""Every job in tests/data/invalid is refused with an error that says where, which key, and how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.loader import load_job_file

CORPUS = Path(__file__).parents[1] / "data" / "invalid"
CASES = sorted(CORPUS.glob("*.yml"))

# Problems about the document as a whole, or about the text of an override, have no key to name.
WHOLE_DOCUMENT = ("YAML syntax error", "the job is empty", "a job is a mapping", "override ")


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_corpus_is_complete() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert case.with_suffix(".expected").is_file(), f"{case.name} has no .expected file"
        assert _lines(case.with_suffix(".expected")), f"{case.name}: .expected is empty"
    for extra in CORPUS.glob("*.expected"):
        assert extra.with_suffix(".yml").is_file(), f"{extra.name} has no job file"
    for extra in CORPUS.glob("*.args"):
        assert extra.with_suffix(".yml").is_file(), f"{extra.name} has no job file"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_invalid_job_is_refused_with_a_useful_error(case: Path) -> None:
    args = case.with_suffix(".args")
    overrides = _lines(args) if args.is_file() else []
    with pytest.raises(ValidationError) as caught:
        load_job_file(case, overrides)
    error = caught.value
    text = error.render()
    assert str(error) == text
    for expected in _lines(case.with_suffix(".expected")):
        assert expected in text, f"{expected!r} not in:\n{text}"
    assert error.problems
    for problem in error.problems:
        assert problem.position is not None, problem
        assert problem.message and problem.hint, f"every problem says how to fix it: {problem}"
        if problem.position.source.startswith("--set "):
            assert problem.position.source[len("--set ") :] in overrides, problem
        else:
            assert problem.position.source == str(case), problem
            assert problem.position.line is not None and problem.position.line >= 1, problem
            assert problem.position.column is not None and problem.position.column >= 1, problem
        if not problem.message.startswith(WHOLE_DOCUMENT):
            assert problem.key_path, f"problem without a key path: {problem}"


def test_a_job_type_distrun_does_not_run_is_one_problem_naming_the_types_it_runs() -> None:
    # A fine-tuning job's keys (model, task, training_data, ...) are its type's: one line says the
    # type is not run here, instead of a problem for each key.
    with pytest.raises(ValidationError) as caught:
        load_job_file(CORPUS / "96-unknown-job-type.yml", [])
    (problem,) = caught.value.problems
    assert problem.key_path == "type" and "finetuning" in problem.message
    assert all(f"`type: {kind}`" in problem.hint for kind in ("command", "pipeline", "sweep"))
