"""Saying once what an Azure ML argument means here, and where the user's code built a job.

Ported code passes arguments that have no meaning for distrun (a workspace's subscription, a
curated environment, `PyTorchDistribution(node_count=...)`). They are accepted and recorded,
and distrun says so once per argument, as a warning pointing at the user's line, so that a
notebook run in a loop is not flooded and `warnings` filters can silence it.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

from distrun.core.errors import Position

# distrun's own files, as imported and as resolved (an install may reach them through a link).
_PACKAGE_DIRS = tuple(
    {
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
        str(Path(__file__).resolve().parent.parent) + os.sep,
    }
)
_said: set[str] = set()


class IgnoredArgumentWarning(UserWarning):
    """An Azure ML argument that distrun accepts and records but does not act on."""


def _user_frame() -> tuple[FrameType | None, int]:
    """The first frame outside distrun, and how many frames up it is from the caller of this."""
    frame = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIRS):
        frame = frame.f_back
        level += 1
    return frame, level


def caller_position() -> Position:
    """Where the user's code is: errors about an SDK-built job point there."""
    frame, _ = _user_frame()
    if frame is None:
        return Position("<python>")
    return Position(frame.f_code.co_filename, frame.f_lineno)


def say_once(key: str, message: str) -> None:
    if key in _said:
        return
    _said.add(key)
    _, level = _user_frame()
    warnings.warn(f"distrun: {message}", IgnoredArgumentWarning, stacklevel=level)


# Why an argument is ignored, by name; the rest get the generic reason.
_NO_WORKSPACE = "jobs run on this machine or on compute targets in $DISTRUN_HOME/config.yaml"
_NO_CREDENTIAL = "distrun needs no Azure credential"
REASONS = {
    "node_count": "Azure ML ignores it too; the number of nodes is instance_count",
    "credential": _NO_CREDENTIAL,
    "auth": _NO_CREDENTIAL,
    "subscription_id": _NO_WORKSPACE,
    "resource_group_name": _NO_WORKSPACE,
    "resource_group": _NO_WORKSPACE,
    "workspace_name": _NO_WORKSPACE,
    "path": "distrun needs no workspace config file",
    "file_name": "distrun needs no workspace config file",
    "registry_name": "environments are not pulled from registries",
    "communication_backend": "the training script picks its backend in init_process_group",
}
GENERIC_REASON = "it has no meaning when distrun runs the job"


def note_ignored(owner: str, ignored: dict[str, Any]) -> None:
    """One warning per reason, naming every argument it covers."""
    by_reason: dict[str, list[str]] = {}
    for name, value in ignored.items():
        by_reason.setdefault(REASONS.get(name, GENERIC_REASON), []).append(f"{name}={_short(value)}")
    for reason, shown in by_reason.items():
        names = ", ".join(shown)
        key = owner + ":" + ",".join(sorted(n.split("=", 1)[0] for n in shown))
        say_once(key, f"{owner} ignores {names} ({reason}); recorded, not used")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def recordable(value: Any) -> Any:
    """A value as it can be kept in the job's properties (JSON): plain data, else its repr."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [recordable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): recordable(v) for k, v in value.items()}
    return repr(value)


class Recorded:
    """An SDK object that accepts Azure ML arguments it cannot use, keeps them, and says so once."""

    _ignored: dict[str, Any]

    def _accept(self, extra: dict[str, Any]) -> None:
        self._ignored = dict(extra)
        note_ignored(type(self).__name__, extra)

    @property
    def ignored(self) -> dict[str, Any]:
        """The arguments this object accepted but does not act on."""
        return dict(getattr(self, "_ignored", {}))
