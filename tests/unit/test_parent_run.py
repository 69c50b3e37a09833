"""The one loop of a job with children (`distrun.runner.parent_run`) and its kinds: each row of
`distrun.runner.job_kinds` with children is a policy with every member the loop asks for, and a kind written
here from nothing but a policy runs through the loop (record, children, outcome). Nothing here
starts a process: the kind written here has children that need no job, or cannot start; real
pipelines and sweeps run in tests/engines/local and tests/surfaces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus
from distrun.loading.documents import load_document_file
from distrun.runner.job_kinds import KINDS, policy_for
from distrun.runner.parent_policy import Look, ParentPolicy
from distrun.runner.parent_run import ParentRun
from distrun.store.index import JobIndex
from distrun.store.layout import Layout

DATA = Path(__file__).resolve().parent.parent / "data"

SWEEP = """\
type: sweep
trial:
  command: python train.py --lr ${{search_space.lr}}
  code: src
sampling_algorithm: grid
search_space:
  lr: {type: choice, values: [0.1, 0.2]}
objective: {goal: minimize, primary_metric: loss}
limits: {max_total_trials: 2}
"""


def _sweep_file(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    path = tmp_path / "sweep.yml"
    path.write_text(SWEEP, encoding="utf-8")
    return path


def test_every_kind_of_parent_is_a_policy_with_every_member_the_loop_asks_for(
    tmp_path: Path, distrun_home: Path
) -> None:
    loaded = {
        "pipeline": load_document_file(DATA / "pipelines" / "chain" / "pipeline.yml"),
        "sweep": load_document_file(_sweep_file(tmp_path)),
    }
    parents = {str(kind): row.policy() for kind, row in KINDS.items() if row.policy is not None}
    assert set(parents) == set(loaded)
    for kind, policy in parents.items():
        assert policy.kind == kind
        assert policy_for(loaded[kind]) is policy
        run = ParentRun.of(loaded[kind], Layout(), lambda text: None, None, f"a-{kind}")
        assert isinstance(run.policy, policy)
        assert isinstance(run.policy, ParentPolicy), f"{policy.__name__} lacks a member of ParentPolicy"
        assert run.policy.name == f"a-{kind}"
    with pytest.raises(DistrunError, match="not a job with children"):
        policy_for(object())


class Countdown:
    """A kind written from nothing but a policy: children `one`, `two`, `three`, started in turn.
    `one` needs no job (done as soon as it starts); the others cannot start (their job is refused)."""

    kind = JobKind.PARALLEL  # a kind distrun names but runs no policy of: this test writes one
    record_compute = "countdown"
    built_file = "countdown.yml"
    canceled_why = "canceled with the countdown"
    longest_wait = 0.01

    def __init__(self, loaded: Any, layout: Layout, say: Any, compute: str | None, name: str, capacity: int | None):
        self.name, self.spec, self.say, self.machine_types = name, loaded, say, []
        self.state: dict[str, dict[str, Any]] = {}

    def steps(self) -> dict[str, Any]:
        return self.state

    def record_fields(self) -> dict[str, Any]:
        return {}

    def final_fields(self) -> dict[str, Any]:
        return {}

    def begin(self) -> str:
        return "Countdown: 3 children"

    def to_start(self) -> Iterator[str]:
        for key in ("one", "two", "three"):
            if key not in self.state:
                self.state[key] = {"job": self.job_name(key), "status": JobStatus.QUEUED.value}
                yield key

    def child(self, key: str) -> None:
        if key == "one":
            self.state[key]["status"] = JobStatus.COMPLETED.value
            self.say(f"[{key}] needs no job")
            return None
        raise DistrunError(f"{key} has no job to run", "nothing to fix: this kind says so")

    def job_name(self, key: str) -> str:
        return f"{self.name}.{key}"

    def started(self, key: str, record: Any) -> None:
        raise AssertionError("no child of a countdown starts a job")

    def running(self) -> list[str]:
        return [k for k, s in self.state.items() if not JobStatus.of(s["status"]).terminal]

    def looked(self, key: str, record: Any) -> Look:
        return Look()

    def outcome_of(self, key: str, record: Any) -> tuple[str, str | None]:
        return record.status, record.reason

    def ended(self, key: str, status: str, reason: str | None) -> str | None:
        self.state[key].update(status=str(status), reason=reason)
        self.say(f"[{key}] {status}: {reason}")
        return None

    def stop_reason(self) -> str | None:
        return None

    def stop_starting(self, why: str) -> None:
        pass

    def canceled(self, key: str, record: Any, why: str) -> tuple[str, str | None] | None:
        return record.status, why

    def not_canceled(self, key: str, why: str) -> None:
        self.state[key]["reason"] = why

    def finished(self) -> bool:
        return len(self.state) == 3 and not self.running()

    def outcome(self) -> tuple[str, str | None]:
        failed = [k for k, s in self.state.items() if s["status"] != JobStatus.COMPLETED.value]
        return (JobStatus.FAILED, f"{len(failed)} did not start") if failed else (JobStatus.COMPLETED, None)

    @staticmethod
    def runs(loaded: Any) -> bool:
        return False

    @staticmethod
    def requested(request: dict[str, Any]) -> Any:
        raise AssertionError("not run in the background here")

    @staticmethod
    def summary(record: Any) -> str:
        return f"{record.name}: {record.status}"


class Header:
    display_name = None
    experiment_name = "countdowns"
    tags = {"kind": "countdown"}


def test_a_kind_written_as_a_policy_alone_runs_through_the_one_loop(distrun_home: Path) -> None:
    said: list[str] = []
    layout = Layout()
    policy = Countdown(Header(), layout, said.append, None, "launch", None)
    assert isinstance(policy, ParentPolicy)
    final = ParentRun(policy, layout, said.append, None).run()

    assert final.status == JobStatus.FAILED
    assert final.reason == "2 did not start"
    assert final.compute == "countdown"
    assert final.experiment_name == "countdowns"
    assert final.steps is not None
    assert final.steps["one"]["status"] == "Completed"
    for key in ("two", "three"):
        assert final.steps[key]["status"] == "Failed"
        refused = DistrunError(f"{key} has no job to run", "nothing to fix: this kind says so")
        assert final.steps[key]["reason"] == f"not started: {refused.render()}"
    assert said[:3] == ["RunId: launch", "Countdown: 3 children", "[one] needs no job"]
    assert JobIndex(layout.db_path).get("launch").terminal
