"""Paths a pip requirement line names, and whether they stay inside a Docker build context.

A build context is built without a container engine as the virtual environment its pip steps
describe (`environments.build_context`). A Docker build sees only the context's files; so may
the build distrun makes in its place: a requirement that names a file or folder elsewhere on
this machine (`/home/me/pkg`, `../wheels`, `-f /srv/wheels`, `pkg @ file:///etc/x`,
`--index-url file:///...`, `-e ../src`, `${HOME}/pkg`, which pip expands) is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

_OPTION = re.compile(
    r"^(-r|--requirement|-c|--constraint|-e|--editable|-f|--find-links|-i|--index-url|--extra-index-url)"
    r"(?:\s*=\s*|\s+|(?<=^-[rcefi]))(.*)$"
)
_DIRECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*@\s*(\S+)")
_VARIABLE = re.compile(r"\$\{[A-Za-z0-9_]+\}")  # pip expands these in requirement lines


def outside_context(line: str, base_dir: Path, context: Path) -> str | None:
    """The path or location of `line` that is not inside `context` (what to name in a refusal);
    None when the line names no such place. Relative paths start at `base_dir`."""
    text = line.strip()
    if _VARIABLE.search(text):
        return text  # its value is this machine's, not the context's
    option = _OPTION.match(text)
    if option is not None:
        return _place_outside(option.group(2).strip(), base_dir, context)
    direct = _DIRECT.match(text)
    if direct is not None:
        return _place_outside(direct.group(1), base_dir, context)
    word = text.split(";", 1)[0].split(" #", 1)[0].strip()
    if word.startswith(("/", ".", "~")) or "://" in word or word.startswith("file:") or _is_path(word):
        return _place_outside(word, base_dir, context)
    return None


def _is_path(word: str) -> bool:
    """pip reads a requirement with a '/' or an archive's name as a path (`wheels/x.whl`)."""
    return "/" in word or word.endswith((".whl", ".tar.gz", ".zip", ".tgz", ".tar.bz2"))


def _place_outside(target: str, base_dir: Path, context: Path) -> str | None:
    """`target` (a path or a URL) when it is a place on this machine outside `context`."""
    if "://" in target or target.startswith("file:"):
        parts = urlsplit(target)
        if not parts.scheme.endswith("file"):  # https://, git+https://: not a path of this machine
            return None
        target = unquote(parts.path)
    target = target.split("#", 1)[0].strip()
    if not target:
        return None
    if target.startswith("~"):
        return target
    path = Path(target)
    resolved = (path if path.is_absolute() else base_dir / path).resolve()
    return None if resolved.is_relative_to(context.resolve()) else target
