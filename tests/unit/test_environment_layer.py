"""A job's layer over its built environment (`distrun.environments.layer`), as files: what it
links to, which console scripts it takes over and how their launcher lines are rewritten. That
pip installs into it and the cached environment stays sealed is proven with real jobs and real
pip in tests/surfaces/test_environments.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from distrun.environments.layer import LINK_FILE, layer_variables, make_layer, make_system_layer

BODY = b"# -*- coding: utf-8 -*-\nimport sys\nfrom pkg import main\nsys.exit(main())\n"


def fake_built(root: Path) -> Path:
    """A built environment as uv leaves it: links to the interpreter, scripts, a lib64 link."""
    built = root / "envs" / "0b2e51f3c8a1"
    site = built / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (built / "lib64").symlink_to("lib")
    (built / "pyvenv.cfg").write_text(
        "home = /opt/py/bin\nversion_info = 3.11.7\ninclude-system-site-packages = false\n"
    )
    bin_dir = built / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "python3").symlink_to("python")
    (bin_dir / "python3.11").symlink_to("python")
    scripts = {
        "pip": b"#!" + os.fsencode(bin_dir / "python") + b"\n" + BODY,
        "pip3.11": b"#!" + os.fsencode(bin_dir / "python3.11") + b"\n" + BODY,
        # the forms installers write when the path is too long for a `#!` line: uv's, pip's
        "torchrun": b"#!/bin/sh\n'''exec' '" + os.fsencode(bin_dir / "python") + b"' \"$0\" \"$@\"\n' '''\n" + BODY,
        "deepspeed": b"#!/bin/sh\n'''exec' " + os.fsencode(bin_dir / "python") + b" \"$0\" \"$@\"\n' '''\n" + BODY,
        "other-python": b"#!/usr/bin/python3\n" + BODY,  # not the environment's: left where it is
        "tool": b"\x7fELF\x02\x01\x01" + bytes(64),  # a program, not a script
        "activate": b"# This file must be used with 'source bin/activate'\n",
    }
    for name, data in scripts.items():
        (bin_dir / name).write_bytes(data)
        (bin_dir / name).chmod(0o555)
    return built


def test_the_layer_runs_the_built_environment_below_its_own_site_packages(tmp_path: Path) -> None:
    built = fake_built(tmp_path)
    layer = tmp_path / "jobs" / "j" / "env"
    layer.parent.mkdir(parents=True)
    make_layer(built, layer)

    assert (layer / "pyvenv.cfg").read_bytes() == (built / "pyvenv.cfg").read_bytes()  # the same base interpreter
    assert os.readlink(layer / "bin" / "python") == os.path.realpath(sys.executable)
    assert os.readlink(layer / "bin" / "python3") == os.readlink(layer / "bin" / "python3.11") == "python"
    assert os.readlink(layer / "lib64") == "lib"
    site = layer / "lib" / "python3.11" / "site-packages"
    assert sorted(os.listdir(site)) == [LINK_FILE]
    assert (site / LINK_FILE).read_text() == (
        f"import site; site.addsitedir({str(built / 'lib' / 'python3.11' / 'site-packages')!r})\n"
    )
    shebang = b"#!" + os.fsencode(layer / "bin" / "python") + b"\n"
    assert (layer / "bin" / "pip").read_bytes() == shebang + BODY
    assert (layer / "bin" / "pip3.11").read_bytes() == shebang + BODY
    assert (layer / "bin" / "torchrun").read_bytes() == shebang + BODY
    assert (layer / "bin" / "deepspeed").read_bytes() == shebang + BODY
    assert (
        os.access(layer / "bin" / "pip", os.X_OK) and os.stat(layer / "bin" / "pip").st_mode & 0o200
    )  # pip may replace it
    assert sorted(os.listdir(layer / "bin")) == [
        "deepspeed",
        "pip",
        "pip3.11",
        "python",
        "python3",
        "python3.11",
        "torchrun",
    ]

    variables = layer_variables(built, layer)
    assert variables["VIRTUAL_ENV"] == str(layer)
    assert variables["PATH"].split(os.pathsep)[:2] == [str(layer / "bin"), str(built / "bin")]


def test_a_long_layer_path_gets_the_shell_launcher(tmp_path: Path) -> None:
    built = fake_built(tmp_path)
    layer = tmp_path / ("j" * 120) / "env"
    layer.parent.mkdir()
    make_layer(built, layer)
    python = os.fsencode(layer / "bin" / "python")
    assert (layer / "bin" / "pip").read_bytes() == (
        b"#!/bin/sh\n'''exec' '" + python + b"' \"$0\" \"$@\"\n' '''\n" + BODY
    )


def test_the_layer_is_made_only_in_a_new_folder(tmp_path: Path) -> None:
    built = fake_built(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    layer = tmp_path / "env"
    layer.symlink_to(elsewhere)  # a link planted where the layer goes is never written through
    with pytest.raises(FileExistsError):
        make_layer(built, layer)
    assert os.listdir(elsewhere) == []


def test_a_script_that_links_to_a_taken_over_one_links_to_its_copy(tmp_path: Path) -> None:
    """pyenv's pip is a link to pip3.11 beside it: the layer's pip is the same link to its copy."""
    built = fake_built(tmp_path)
    (built / "bin" / "pip").unlink()
    (built / "bin" / "pip").symlink_to("pip3.11")
    (built / "bin" / "elsewhere").symlink_to("/usr/bin/env")  # a link out of bin/: not taken over
    layer = tmp_path / "env"
    make_layer(built, layer, {"pip", "pip3.11", "elsewhere"})
    assert os.readlink(layer / "bin" / "pip") == "pip3.11"
    assert (layer / "bin" / "pip3.11").read_bytes().startswith(b"#!" + os.fsencode(layer / "bin" / "python") + b"\n")
    assert not os.path.lexists(layer / "bin" / "elsewhere")


def test_the_layer_over_a_system_interpreter_includes_its_site_packages(tmp_path: Path) -> None:
    """No pyvenv.cfg to copy, no link file: Python adds the interpreter's own site-packages."""
    prefix = tmp_path / "usr"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3").symlink_to(sys.executable)
    (prefix / "bin" / "pip3").write_bytes(b"#!" + os.fsencode(prefix / "bin" / "python3") + b"\n" + BODY)
    layer = tmp_path / "env"
    make_system_layer(prefix, prefix / "bin" / "python3", layer, {"pip3"})
    config = (layer / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = true\n" in config
    assert f"home = {os.path.dirname(os.path.realpath(sys.executable))}\n" in config
    assert os.readlink(layer / "bin" / "python") == os.path.realpath(sys.executable)
    site = layer / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert site.is_dir() and os.listdir(site) == []
    assert (layer / "bin" / "pip3").read_bytes() == b"#!" + os.fsencode(layer / "bin" / "python") + b"\n" + BODY
    # The interpreter's bin/ (/usr/bin, say) keeps its place on PATH: only the layer's comes first.
    variables = layer_variables(None, layer)
    assert variables["PATH"] == os.pathsep.join([str(layer / "bin"), os.environ.get("PATH") or os.defpath])
