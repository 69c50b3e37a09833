"""A job's own layer over the Python that runs distrun, for the jobs that run in it.

A job with no `environment` runs in distrun's own Python. Its `pip install` used to install into
distrun's environment: a job's `pip install 'mlflow<2.19'` downgraded the mlflow that distrun's
tracking server runs (which then died on its next import) and what every later job gets. Such a
job runs instead in a writable layer of its own over distrun's environment, made exactly as a
built environment's (`distrun.environments.layer`): its `python` sees every package of
distrun's, and what its `pip` (first on PATH) or `python -m pip` installs lands in the layer, in
the job's folder, and nowhere else. Of distrun's console scripts only pip's are run by the
layer's python (copying all of them cost some 100 ms a job on a loaded machine); the others run
distrun's python from its bin folder, second on PATH, and do not see what the job installed.

Over a virtual environment (a `pyvenv.cfg` beside one lib/*/site-packages, as pip, uv and
`python -m venv` make) the layer is a built environment's; over a system interpreter (no
virtual environment: the machine's python3, a pyenv or uv-managed install) it is a virtual
environment with `include-system-site-packages = true`, which sees every package of that
interpreter's and installs into itself. On Ray the node agent makes the layer on each node,
over the Python that runs distrun there (`distrun.backends.ray.node_agent`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# What the notes of a job that runs in distrun's own Python say of where its installs go.
IN_OWN_LAYER = "in a layer of the job's own that takes its installs"


def own_environment() -> Path | None:
    """The virtual environment distrun runs in, if it is one that a layer can be made over."""
    prefix = Path(sys.prefix)
    if prefix == Path(sys.base_prefix) or not (prefix / "pyvenv.cfg").is_file():
        return None
    if len(list(prefix.glob("lib/*/site-packages"))) != 1 or not (prefix / "bin" / "python").exists():
        return None
    return prefix


def system_interpreter() -> Path | None:
    """The interpreter distrun runs in when it is no virtual environment (sys.prefix is its
    installation's), if it is a program a layer can link to."""
    if Path(sys.prefix) != Path(sys.base_prefix) or not sys.executable:
        return None
    executable = Path(sys.executable)
    return executable if executable.is_file() and os.access(executable, os.X_OK) else None


def pip_scripts() -> frozenset[str]:
    """pip, pip3, pip3.11: the names pip installs itself under."""
    return frozenset({"pip", f"pip{sys.version_info[0]}", f"pip{sys.version_info[0]}.{sys.version_info[1]}"})


def own_layer(layer: Path, materialize: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The ranks' variables (layer first on PATH, VIRTUAL_ENV) and the layer's record
    ({"layer", "built"}, as for a built environment: a backend that copies the job folder makes
    it again), for a job that runs in distrun's own Python; ({}, {}) where no layer can be made.
    With `materialize` the layer is made now (`distrun plan` only names it)."""
    from distrun.environments.layer import layer_variables, make_layer, make_system_layer

    built = own_environment()
    if built is not None:
        if materialize:
            make_layer(built, layer, pip_scripts())
        return layer_variables(built, layer), {"layer": str(layer), "built": str(built)}
    interpreter = system_interpreter()
    if interpreter is None:
        return {}, {}
    if materialize:
        make_system_layer(Path(sys.prefix), interpreter, layer, pip_scripts())
    return layer_variables(None, layer), {"layer": str(layer), "built": sys.prefix}
