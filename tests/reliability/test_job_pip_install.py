"""A job's `pip install` never changes distrun's own Python, nor what a later job gets.

A job with no environment runs in the Python that runs distrun. Three steps of a sweep pipeline
that ran `pip install 'mlflow<2.19'` there downgraded distrun's own mlflow, and its tracking server
died on the next import. Here a job installs two packages (made here as wheels, no index), one
with `pip` from PATH and one with `python -m pip`, and uses them; distrun's Python and the next
job must not see them.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from support.cli import REPO, cli_env, distrun_cli
from support.reliability import job_file


def wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel of package `name` whose module says its version."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: distrun-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}"
        for path, text in files.items()
    ]
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


INSTALLS = """
    command: >-
      pip install --no-index --no-deps --disable-pip-version-check -q {first} &&
      python -m pip install --no-index --no-deps --disable-pip-version-check -q {second} &&
      python -c "import distrun_probe_one as one, distrun_probe_two as two, sys;
      print('job sees', one.VERSION, two.VERSION, one.__file__, two.__file__, sys.prefix)"
"""
LOOKS = """
    command: >-
      python -c "import importlib.util as u;
      print('next job sees', u.find_spec('distrun_probe_one'), u.find_spec('distrun_probe_two'))"
"""


def test_a_jobs_pip_install_lands_in_its_own_layer_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = wheel(tmp_path, "distrun_probe_one", "1.0")
    second = wheel(tmp_path, "distrun_probe_two", "2.0")
    job = job_file(tmp_path / "installs", INSTALLS.format(first=first, second=second))
    done = distrun_cli(home, "run", str(job), "--name", "installs", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    said = next(line for line in done.stdout.splitlines() if "job sees" in line).split("job sees ")[1].split()
    layer = home / "jobs" / "installs"
    assert said[:2] == ["1.0", "2.0"], said
    # Installed in the job's own folder, by both `pip` and `python -m pip`.
    assert all(Path(path).is_relative_to(layer) for path in said[2:]), said

    # distrun's own Python does not have them...
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util as u; print(u.find_spec('distrun_probe_one'), u.find_spec('distrun_probe_two'))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.stdout.strip() == "None None", found.stdout + found.stderr
    # ...nor does the next job.
    looks = job_file(tmp_path / "looks", LOOKS)
    after = distrun_cli(home, "run", str(looks), "--name", "looks", timeout=300)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "next job sees None None" in after.stdout


def distrun_python_sees(*modules: str) -> str:
    """What distrun's own Python finds of `modules` (None each, when the job left it alone)."""
    code = f"import importlib.util as u; print(*(u.find_spec(m) for m in {modules!r}))"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return found.stdout.strip() + found.stderr


@pytest.mark.parametrize(
    ("environment", "flags"),
    [
        # A curated name whose image this machine's engine does not have: it runs in distrun's Python.
        ("azureml:AzureML-sklearn-1.5@latest", ()),
        # An image with containers switched off: distrun's Python too.
        ("{image: python:3.11-slim}", ("--no-container",)),
    ],
    ids=["curated-name", "image-without-containers"],
)
def test_a_job_whose_environment_runs_in_distruns_python_installs_into_its_own_layer(
    tmp_path: Path, environment: str, flags: tuple[str, ...]
) -> None:
    """The original incident's jobs named a curated environment: a name, or an image, that runs in
    distrun's own Python gets the same layer of its own as a job with no environment."""
    home = tmp_path / "home"
    first = wheel(tmp_path, "distrun_probe_three", "3.0")
    second = wheel(tmp_path, "distrun_probe_four", "4.0")
    text = INSTALLS.format(first=first, second=second).replace("distrun_probe_one", "distrun_probe_three")
    text = text.replace("distrun_probe_two", "distrun_probe_four") + f"    environment: {environment}\n"
    job = job_file(tmp_path / "installs", text)
    done = distrun_cli(home, "run", str(job), "--name", "installs", *flags, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "in a layer of the job's own that takes its installs" in done.stdout + done.stderr
    said = next(line for line in done.stdout.splitlines() if "job sees" in line).split("job sees ")[1].split()
    assert said[:2] == ["3.0", "4.0"], said
    assert all(Path(path).is_relative_to(home / "jobs" / "installs") for path in said[2:]), said
    assert distrun_python_sees("distrun_probe_three", "distrun_probe_four") == "None None"


SYSTEM_INSTALLS = """
    command: >-
      python -m pip install --no-index --no-deps --disable-pip-version-check -q {wheel} &&
      python -c "import distrun_probe_one as one, sys; print('job sees', one.VERSION, one.__file__, sys.prefix)"
"""


def system_python() -> tuple[str, dict[str, str]]:
    """The interpreter below the test environment (no virtual environment: sys.prefix is its
    installation's), and the PYTHONPATH that gives it distrun and its packages."""
    base = getattr(sys, "_base_executable", None)
    assert sys.prefix != sys.base_prefix and base, "the tests run in a virtual environment"
    packages = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    return base, {"PYTHONPATH": ":".join([str(REPO / "src"), *packages])}


def test_distrun_run_by_a_system_interpreter_gives_a_job_its_own_layer(tmp_path: Path) -> None:
    """distrun run by an interpreter that is no virtual environment: the job's layer is a virtual
    environment over it that sees its packages (distrun's own here) and takes the job's installs."""
    python, path = system_python()
    home = tmp_path / "home"

    def distrun(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**cli_env(home), **path}
        return subprocess.run([python, "-m", "distrun", *args], capture_output=True, text=True, timeout=300, env=env)

    probe = "import importlib.util as u; print(u.find_spec('distrun_probe_one'))"

    def interpreter_finds() -> str:
        env = {**cli_env(home), **path}
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
        return found.stdout.strip() + found.stderr

    assert interpreter_finds() == "None", "an earlier run installed the probe into the interpreter itself"
    wheel_path = wheel(tmp_path, "distrun_probe_one", "1.0")
    done = distrun(
        "run", str(job_file(tmp_path / "installs", SYSTEM_INSTALLS.format(wheel=wheel_path))), "--name", "sys"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = next(line for line in done.stdout.splitlines() if "job sees" in line).split("job sees ")[1].split()
    layer = home / "jobs" / "sys" / "env"
    # Installed in the job's layer, which is the job's sys.prefix.
    assert said[0] == "1.0" and Path(said[1]).is_relative_to(layer) and said[2] == str(layer), said
    assert "include-system-site-packages = true" in (layer / "pyvenv.cfg").read_text()

    assert interpreter_finds() == "None"  # distrun's interpreter does not have it
    after = distrun("run", str(job_file(tmp_path / "looks", LOOKS)), "--name", "looks")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "next job sees None None" in after.stdout


def test_the_wheels_here_install_as_pip_expects(tmp_path: Path) -> None:
    """The test's own wheels are real wheels: pip installs one into a target folder of its own."""
    target = tmp_path / "target"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "-q"]
        + ["--target", str(target), str(wheel(tmp_path, "distrun_probe_one", "1.0"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "distrun_probe_one" / "__init__.py").read_text() == "VERSION = '1.0'\n"
