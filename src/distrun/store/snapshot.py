"""Copy a job's `code` folder into its job folder, so edits made later do not change a run.

`.amlignore` (Azure ML's name) or else `.gitignore` patterns are honoured, with git's
syntax. Symbolic links that point inside the folder are kept as links; one that points
outside is refused: the snapshot would otherwise expose or depend on files elsewhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from distrun.errors import DistrunError

IGNORE_FILES = (".amlignore", ".gitignore")
ALWAYS_SKIPPED = (".git", "__pycache__")


def _ignore_spec(source: Path) -> Any:
    for name in IGNORE_FILES:
        path = source / name
        if path.is_file():
            import pathspec

            return pathspec.GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return None


def snapshot_code(source: Path, target: Path) -> int:
    """Copy `source` to `target`; returns the number of files copied."""
    source = source.resolve()
    spec = _ignore_spec(source)
    copied = 0
    target.mkdir(parents=True, exist_ok=True)
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        rel_dir = here.relative_to(source)
        kept_dirs = []
        for name in sorted(dirs):
            rel = (rel_dir / name).as_posix()
            if name in ALWAYS_SKIPPED or (spec is not None and spec.match_file(rel + "/")):
                continue
            if (here / name).is_symlink():
                _link(here / name, source, target / rel_dir / name)
                continue
            kept_dirs.append(name)
            (target / rel_dir / name).mkdir(exist_ok=True)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = (rel_dir / name).as_posix()
            if spec is not None and spec.match_file(rel):
                continue
            src = here / name
            if src.is_symlink():
                _link(src, source, target / rel_dir / name)
            else:
                shutil.copy2(src, target / rel_dir / name)
                copied += 1
    return copied


def _link(link: Path, root: Path, dest: Path) -> None:
    pointed = (link.parent / os.readlink(link)).resolve()
    if pointed != root and root not in pointed.parents:
        raise DistrunError(
            f"code folder: {link} is a symbolic link to {pointed}, outside the code folder {root}",
            "copy the file into the code folder, or add the link to .amlignore",
        )
    os.symlink(os.readlink(link), dest)
