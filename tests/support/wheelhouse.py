"""Tiny pure-Python wheels written by hand, so environment tests install from a local folder
(no package index, no network) a package distrun's own environment does not have."""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile
from pathlib import Path


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    module_body: str,
    scripts: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A wheel of one module; `scripts`: console script name -> `module:function`; `requires`:
    its dependencies (`Requires-Dist`)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    depends = "".join(f"Requires-Dist: {line}\n" for line in requires)
    files = {
        f"{dist}.py": module_body,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{depends}",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: distrun-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    if scripts:
        files[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            data = text.encode("utf-8")
            archive.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def local_wheel_environment(wheels: Path, requirement: str) -> str:
    """A job file's `environment:` block: this Python, and `requirement` from the folder `wheels` only."""
    return f"""environment:
  conda_file:
    dependencies:
      - python={sys.version_info.major}.{sys.version_info.minor}
      - pip:
          - --no-index
          - --find-links {wheels}
          - {requirement}
"""
