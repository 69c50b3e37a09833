"""The web UI's models page: every registered model, its versions (type, the job it came from,
with a link, archived or not) and each version's files. Read from distrun's store only: a
version's files are distrun's own read-only copy, never a job folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

FILES_SHOWN = 50  # per version; the rest are counted


@dataclass(frozen=True)
class VersionRow:
    name: str
    version: str
    type: str
    job: str | None
    source: str
    created_at: float
    archived: bool
    files: list[str]
    more_files: int


def model_rows(home: Path) -> dict[str, list[VersionRow]]:
    """Each model's versions, newest first, names in order."""
    from distrun.data.model_store import adopt_registered
    from distrun.data.model_versions import FILES, list_models

    adopt_registered(home)
    found: dict[str, list[VersionRow]] = {}
    for model in list_models(home, archived=True):
        files = _files(model.folder / FILES)
        row = VersionRow(
            model.name, model.version, model.type, model.job, model.source, model.created_at, model.archived,
            files[:FILES_SHOWN], max(0, len(files) - FILES_SHOWN),
        )  # fmt: skip
        found.setdefault(model.name, []).insert(0, row)
    return dict(sorted(found.items()))


def _files(top: Path) -> list[str]:
    found = []
    for folder, _dirs, names in os.walk(top):
        found += [os.path.relpath(os.path.join(folder, name), top) for name in names]
    return sorted(found)


async def models_page(request: Request) -> Response:
    ui: Any = request.app.state.ui
    models = await ui.offload(model_rows, ui.settings.layout.home)
    return ui.page(request, "models.html", {"models": models})  # type: ignore[no-any-return]
