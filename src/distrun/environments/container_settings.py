"""Whether the user switched containers off: `distrun run --no-container` (DISTRUN_CONTAINERS=off)
and config.yaml's `containers: {use: false}` keep jobs out of containers on purpose; the same
section's `mounts` adds mounts to every container."""

from __future__ import annotations

import os
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.spec.config_sections import read_section

SWITCH = "DISTRUN_CONTAINERS"  # "off": what `distrun run --no-container` sets


def containers_settings(config_path: Path) -> dict[str, object]:
    """config.yaml's `containers` section, checked (`use`, `mounts`)."""
    section, smap = read_section(config_path, "containers", "containers: {use: false}")
    known = {"use", "mounts"}
    for key in section:
        if key not in known:
            raise DistrunError(
                f"{smap.find(('containers', key))}: containers.{key}: not a setting",
                "containers takes use (true/false) and mounts (a list of SRC:DST[:ro])",
            )
    if "use" in section and not isinstance(section["use"], bool):
        raise DistrunError(f"{smap.find(('containers', 'use'))}: containers.use: expected true or false")
    return dict(section)


def switched_off(config_path: Path, settings: dict[str, object] | None = None) -> str | None:
    """Why jobs stay out of containers on purpose, or None."""
    if os.environ.get(SWITCH, "").lower() == "off":
        return "--no-container"
    if (settings if settings is not None else containers_settings(config_path)).get("use") is False:
        return f"containers.use is false in {config_path}"
    return None
