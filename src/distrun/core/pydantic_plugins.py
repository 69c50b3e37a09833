"""pydantic without its plugin discovery, in the `distrun` command's own process.

The first time a model validates, pydantic looks for plugins: its loader imports
importlib.metadata and reads every installed distribution's entry points. That was 14 ms of
each `distrun run` on a 2-core machine, a tenth of the command's own start. The command's
process validates only distrun's models and runs no user code, so a plugin would have nothing
there to observe. The SDK (`import distrun` in a user's program) never calls this: the user's
pydantic plugins work there as always.
"""

from __future__ import annotations

import sys
import types

# pydantic imports this module inside the function that builds a validator
# (pydantic/plugin/_schema_validator.py: `from ._loader import get_plugins`), so a module
# already in sys.modules under this name is the one it uses.
LOADER = "pydantic.plugin._loader"


def skip_plugin_discovery() -> None:
    """Stand in for pydantic's plugin loader with one that finds no plugins; idempotent."""
    if LOADER in sys.modules:
        return  # pydantic has looked already (or this ran before): keep what it found
    loader = types.ModuleType(LOADER, "distrun's stand-in: the distrun command loads no pydantic plugins")
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
