"""Positions of the values in a job document, keyed by key path.

The loaders turn YAML into plain dicts and lists (what pydantic validates) and keep, beside
them, a `SourceMap` from key path to file position, so that any error found later, in any
layer, can say where the offending value was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distrun.core.errors import Position

KeyPath = tuple[str | int, ...]


def format_key_path(path: KeyPath) -> str:
    """`("inputs", "data", "path")` -> `inputs.data.path`; list items as `[0]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + part
    return text


@dataclass
class SourceMap:
    """Key path -> position; a lookup falls back to the nearest enclosing key."""

    source: str
    positions: dict[KeyPath, Position] = field(default_factory=dict)

    def set(self, path: KeyPath, position: Position) -> None:
        self.positions[path] = position

    def find(self, path: KeyPath) -> Position:
        probe = tuple(path)
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            probe = probe[:-1]
        return self.positions.get((), Position(self.source))

    def move(self, old: KeyPath, new: KeyPath) -> None:
        """A normalizer moved a subtree: its positions follow it."""
        n = len(old)
        for path, pos in list(self.positions.items()):
            if path[:n] == old:
                self.positions.setdefault(new + path[n:], pos)
