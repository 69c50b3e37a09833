"""JSON as distrun writes it: compact files, and what `-o json` shows (indented only when small)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from distrun.core.json_encoding import MAX_INDENTED_BYTES, compact_json, shown_json
from distrun.loading.loader import load_job_data
from distrun.plan import Bindings, Placement, build_plan


def _plan_dict(nodes: int, per_node: int) -> dict[str, object]:
    data = {
        "command": "python train.py",
        "resources": {"instance_count": nodes},
        "distribution": {"type": "pytorch", "process_count_per_instance": per_node},
    }
    spec = load_job_data(data, Path(".")).spec
    where = Placement(hosts=tuple(f"node-{i:04d}" for i in range(nodes)), master_port=29500, job_dir="/j", run_id="r")
    return build_plan(spec, where, Bindings()).to_dict()


def test_compact_json_is_the_same_data_without_whitespace() -> None:
    plan = _plan_dict(2, 2)
    encoded = compact_json(plan)
    assert json.loads(encoded) == json.loads(json.dumps(plan))
    assert b"\n" not in encoded and b'": ' not in encoded and b", " not in encoded


def test_compact_json_sorts_keys_when_asked() -> None:
    assert compact_json({"b": 1, "a": [1, 2]}, sort_keys=True) == b'{"a":[1,2],"b":1}'


def test_a_small_value_is_shown_indented() -> None:
    plan = _plan_dict(2, 2)
    shown = shown_json(plan)
    assert shown == json.dumps(plan, indent=2)
    assert '\n  "nodes": [' in shown


def test_a_large_value_is_shown_compact_and_whole() -> None:
    plan = _plan_dict(256, 8)
    shown = shown_json(plan)
    assert len(json.dumps(plan, separators=(",", ":"))) > MAX_INDENTED_BYTES  # the case is large enough
    assert "\n" not in shown
    assert json.loads(shown) == json.loads(json.dumps(plan))


def test_values_json_has_no_type_for_are_shown_as_text() -> None:
    when = datetime(2026, 11, 23, tzinfo=timezone.utc)
    assert json.loads(shown_json({"at": when, "path": Path("/a/b")})) == {"at": str(when), "path": "/a/b"}
