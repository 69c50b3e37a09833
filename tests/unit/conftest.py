"""tests/unit: distrun's pure parts, in this process. No test here starts a process: one that does
belongs with what it starts (tests/agent, tests/surfaces, tests/engines/<engine>)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


class StartedAProcess(AssertionError):
    """A unit test tried to start a process."""


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        raise StartedAProcess(f"tests/unit starts no process; this test ran {args!r}: move it out of tests/unit")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield


@pytest.fixture(autouse=True)
def containers_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the machine's container engine holds an image is asked of the engine, a process:
    unit tests plan and render jobs as `--no-container` does. A test of the choice itself
    (tests/unit/test_container_run.py) takes the switch away; tests/engines/local runs containers."""
    monkeypatch.setenv("DISTRUN_CONTAINERS", "off")
