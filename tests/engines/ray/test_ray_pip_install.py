"""A job's `pip install` on Ray never changes the Ray nodes' Python, nor what a later job gets.

A job that names no environment runs in the Python of the Ray nodes (the one that runs distrun's
node agent there). Its `pip install` used to install into that Python, so every later job on the
cluster got the package (or the downgrade). Each node's agent now gives the job a layer of its own
over that Python, first on the ranks' PATH: here both nodes of a job install a wheel made here (no
index) with the `pip` first on PATH and use it; the nodes' Python and the next job do not see it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.wheelhouse import make_wheel

TIMEOUT = 300
INSTALLS = """
command: >-
  pip install --no-index --no-deps --disable-pip-version-check -q {wheel} &&
  python -c "import distrun_probe_ray as probe, sys;
  print('node', $NODE_RANK, 'sees', probe.VERSION, probe.__file__, sys.prefix)"
resources:
  instance_count: 2
"""
LOOKS = """
command: >-
  python -c "import importlib.util as u; print('next job sees', u.find_spec('distrun_probe_ray'))"
"""


def test_a_jobs_pip_install_on_ray_lands_in_its_own_layer_on_each_node(
    ray_cli, ray_target, write_job, tmp_path: Path
) -> None:
    wheel = make_wheel(tmp_path / "wheels", "distrun-probe-ray", "1.0", "VERSION = '1.0'\n")
    proc = ray_cli("run", str(write_job(INSTALLS.format(wheel=wheel))), "--compute", ray_target)
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-4000:]
    said = {
        line.split(" sees ")[0].split()[-1]: line.split(" sees ")[1].split()
        for line in out.splitlines()
        if " sees " in line
    }
    assert sorted(said) == ["0", "1"], out[-4000:]
    for version, module, prefix in said.values():
        # Installed into the layer in that node's copy of the job folder, which is the ranks' sys.prefix.
        assert version == "1.0" and Path(prefix).name == "env" and Path(module).is_relative_to(prefix), said
    assert len({prefix for _, _, prefix in said.values()}) == 2, "each node makes its own layer"

    # The Ray nodes run this Python: it does not have the package...
    probe = "import importlib.util as u; print(u.find_spec('distrun_probe_ray'))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == "None", found.stdout + found.stderr
    # ...nor does the next job on the cluster.
    after = ray_cli("run", str(write_job(LOOKS)), "--compute", ray_target)
    out, _ = after.communicate(timeout=TIMEOUT)
    assert after.returncode == 0, out[-4000:]
    assert "next job sees None" in out, out[-4000:]
