"""What a person reads: errors in one round and in file order, plan text, summaries, tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.loader import load_job_file

INVALID = Path(__file__).parents[1] / "data" / "invalid"


def test_every_problem_is_reported_in_one_round_in_file_order() -> None:
    with pytest.raises(ValidationError) as caught:
        load_job_file(INVALID / "95-every-problem-at-once.yml")
    lines = [p.position.line for p in caught.value.problems if p.position]
    assert [p.key_path for p in caught.value.problems] == [
        "command",
        "resources.instance_cont",
        "distribution.type",
        "distribution.process_count_per_instanse",
    ]
    assert lines == sorted(lines)
