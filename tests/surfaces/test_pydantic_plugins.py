"""The `distrun` command validates without pydantic's plugin discovery; a user's program keeps it.

Each probe runs in a fresh interpreter, since which loader pydantic uses is fixed by the first
validation in a process.
"""

from __future__ import annotations

import os
import subprocess
import sys

from support.cli import SRC

SRC = str(SRC)

_VALIDATE = """
import sys
from pydantic import BaseModel

class Job(BaseModel):
    nodes: int

assert Job.model_validate({"nodes": "2"}).nodes == 2
loader = sys.modules["pydantic.plugin._loader"]
print(getattr(loader, "__file__", None) is not None, "importlib.metadata" in sys.modules)
"""


def probe(before: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run(
        [sys.executable, "-c", before + _VALIDATE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_the_command_validates_without_looking_for_plugins() -> None:
    # pydantic's own loader is not imported, nor importlib.metadata, which it needs to look.
    assert probe("from distrun.core.pydantic_plugins import skip_plugin_discovery\nskip_plugin_discovery()\n") == (
        "False False"
    )


def test_a_users_program_keeps_pydantics_plugin_loader() -> None:
    # `import distrun` (the SDK) leaves pydantic as it is: its real loader, which reads entry points.
    assert probe("import distrun\ndistrun.command\n") == "True True"


def test_a_loader_pydantic_already_used_is_kept() -> None:
    before = (
        "from pydantic import BaseModel\n"
        "class First(BaseModel):\n    x: int\n"
        "First(x=1)\n"
        "from distrun.core.pydantic_plugins import skip_plugin_discovery\nskip_plugin_discovery()\n"
    )
    assert probe(before) == "True True"
