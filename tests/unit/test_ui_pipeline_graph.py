"""The web UI's drawing of a pipeline, from its record alone: boxes in levels, an arrow per data
flow, each step's state and duration, links only to steps' jobs that exist, every name escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from distrun.store.index import JobRecord
from distrun.ui.pipeline_view import BOX_W, GAP_X, counts, graph_svg, step_of, step_views

SVG = "{http://www.w3.org/2000/svg}"


def _pipeline(steps: dict) -> JobRecord:
    return JobRecord(name="nightly", status="Running", compute="pipeline", folder="/x", created_at=0.0, steps=steps)


def _step(status: str, depends_on: list[str], **more: object) -> dict:
    return {"job": more.pop("job", None), "status": status, "depends_on": depends_on, **more}


STEPS = {
    "prepare": _step("Completed", [], job="earlier.prepare", reused=True, started_at=10.0, ended_at=10.0),
    "train": _step("Running", ["prepare"], job="nightly.train", started_at=11.0),
    "check": _step("Failed", ["prepare"], job="nightly.check", started_at=11.0, ended_at=13.5, reason="exit 1"),
    "score": _step("NotStarted", ["train", "check"], job="nightly.score"),
    "report": _step("Canceled", ["check"], job="nightly.report", reason="not started: step check did not complete"),
}


def test_boxes_stand_in_levels_with_an_arrow_per_data_flow_and_link_to_steps_that_ran() -> None:
    views = step_views(_pipeline(STEPS), now=20.0)
    svg = graph_svg(views)
    root = ET.fromstring(svg)  # well-formed markup
    boxes = {g.get("data-step"): g for g in root.iter(f"{SVG}g")}
    assert {name: g.get("data-state") for name, g in boxes.items()} == {
        "prepare": "Reused",
        "train": "Running",
        "check": "Failed",
        "score": "not started",
        "report": "Canceled",
    }
    x = {name: int(g.find(f"{SVG}rect").get("x")) for name, g in boxes.items()}
    assert x["train"] == x["check"] == x["prepare"] + BOX_W + GAP_X  # level 1
    assert x["score"] == x["report"] == x["train"] + BOX_W + GAP_X  # level 2
    edges = {(p.get("data-from"), p.get("data-to")) for p in root.iter(f"{SVG}path") if p.get("class") == "edge"}
    assert edges == {
        ("prepare", "train"),
        ("prepare", "check"),
        ("train", "score"),
        ("check", "score"),
        ("check", "report"),
    }
    links = {a.get("href") for a in root.iter(f"{SVG}a")}
    # A reused step links to the earlier job whose outputs it has; steps that never started link nowhere.
    assert links == {"/jobs/earlier.prepare", "/jobs/nightly.train", "/jobs/nightly.check"}
    texts = {g.get("data-step"): [t.text for t in g.iter(f"{SVG}text")] for g in boxes.values()}
    assert texts["check"] == ["check", "Failed · 2.5 s"]
    assert texts["train"] == ["train", "Running · 9.0 s"]  # running: until now
    assert texts["score"] == ["score", "not started"]
    assert counts(_pipeline(STEPS)) == "5 steps: 1 Reused, 1 Running, 1 Failed, 1 not started, 1 Canceled"


def test_names_are_escaped_and_odd_records_draw_without_error() -> None:
    hostile = {
        'a<script>alert("x")</script>': _step("Completed", [], job='p.a"><img src=x onerror=1>', started_at=1.0),
        "b": {"status": 7, "depends_on": "a", "started_at": "soon"},  # garbage in every field
        "c": "not a mapping",
    }
    svg = graph_svg(step_views(_pipeline(hostile)))
    ET.fromstring(svg)
    assert "<script" not in svg and "<img" not in svg
    assert 'href="/jobs/p.a%22%3E%3Cimg%20src%3Dx%20onerror%3D1%3E"' in svg
    assert re.search(r'data-step="c" data-state="not started"', svg)


def test_a_step_job_knows_its_step_name() -> None:
    record = JobRecord(name="nightly.stage.train", status="Completed", compute="local", folder="/x", created_at=0.0)
    assert step_of(record) is None
    record.parent = "nightly"
    assert step_of(record) == "stage.train"
