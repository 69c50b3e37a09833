"""A value output's file, read when the step reading it starts: typed, bounded, never through a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError
from distrun.runner.pipelines import output_value
from distrun.spec.loaded_pipeline import UpstreamOutput
from distrun.store.layout import Layout

UP = UpstreamOutput("train", "output")


def _written(layout: Layout, text: str) -> Path:
    path = layout.job("p.train").named_output("output") / "output"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_value_is_read_as_the_reading_inputs_type(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    _written(layout, "42\n")
    assert output_value(layout, "p.train", UP, "integer") == 42
    assert output_value(layout, "p.train", UP, "number") == 42.0
    assert output_value(layout, "p.train", UP, "string") == "42"  # one trailing newline dropped
    _written(layout, "True")
    assert output_value(layout, "p.train", UP, "boolean") is True
    with pytest.raises(DistrunError, match=r"output output of step train \(job p.train\) is 'True', not a whole"):
        output_value(layout, "p.train", UP, "integer")


def test_a_missing_linked_or_huge_value_is_an_error_naming_the_step(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    with pytest.raises(DistrunError, match="holds no value: the step wrote nothing"):
        output_value(layout, "p.train", UP, "string")
    path = _written(layout, "x")
    os.unlink(path)
    (tmp_path / "secret").write_text("not the step's")
    path.symlink_to(tmp_path / "secret")  # the step's processes can plant a link there
    with pytest.raises(DistrunError, match="cannot be read"):
        output_value(layout, "p.train", UP, "string")
    os.unlink(path)
    path.write_text("x" * (65 << 10))
    with pytest.raises(DistrunError, match="cannot be read"):
        output_value(layout, "p.train", UP, "string")
