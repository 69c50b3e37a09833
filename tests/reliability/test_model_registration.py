"""A hostile job and the models registered from its output: links and pipes it planted are never
followed or read, and nothing it does after the registration changes the registered files."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

RunCli = Callable[..., subprocess.CompletedProcess[str]]
WriteJob = Callable[..., Path]


def test_links_and_pipes_in_an_output_are_left_out_and_later_changes_reach_no_version(
    run_cli: RunCli, write_job: WriteJob, distrun_home: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not the job's\n")
    hostile = write_job(
        f"""
        name: hostile_1
        command: >-
          echo weights > ${{{{outputs.model}}}}/weights &&
          mkdir ${{{{outputs.model}}}}/sub && echo inner > ${{{{outputs.model}}}}/sub/inner &&
          ln -s {secret} ${{{{outputs.model}}}}/stolen &&
          ln -s {tmp_path} ${{{{outputs.model}}}}/outside &&
          mkfifo ${{{{outputs.model}}}}/pipe
        outputs:
          model: {{type: custom_model}}
        """
    )
    assert run_cli("run", str(hostile)).returncode == 0
    made = run_cli(
        "model", "create", "-n", "m", "-p", "azureml://jobs/hostile_1/outputs/model", "-o", "json", timeout=30
    )
    assert made.returncode == 0, made.stderr
    model = json.loads(made.stdout)
    files = Path(model["path"])
    kept = sorted(str(p.relative_to(files)) for p in files.rglob("*"))
    assert kept == ["sub", "sub/inner", "weights"]  # no link, no pipe, nothing from outside
    for left_out in ("stolen", "outside", "pipe"):
        assert f"{left_out}:" in made.stderr

    # After: the job's output is swapped for links and changed; the version is a copy of its own.
    output = distrun_home / "jobs" / "hostile_1" / "named-outputs" / "model"
    (output / "weights").unlink()
    os.symlink(secret, output / "weights")
    (output / "sub" / "inner").write_text("changed\n")
    assert (files / "weights").read_text() == "weights\n" and (files / "sub" / "inner").read_text() == "inner\n"
    assert not any(p.is_symlink() for p in files.rglob("*"))
    assert all(p.stat().st_mode & 0o222 == 0 for p in [files, *files.rglob("*")])  # read-only
    assert json.loads(run_cli("model", "show", "-n", "m", "-o", "json").stdout)["files_unchanged"] is True
    # A job reading the version by path as the same user could make a file writable and change it:
    # `model show` reads the files again and says so.
    (files / "sub").chmod(0o755)
    (files / "sub" / "inner").chmod(0o644)
    (files / "sub" / "inner").write_text("tampered\n")
    assert json.loads(run_cli("model", "show", "-n", "m", "-o", "json").stdout)["files_unchanged"] is False

    # An output the job swapped for a link as a whole is refused, not followed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "weights").write_text("not the job's\n")
    (output.parent / "model2").symlink_to(elsewhere)
    bindings = distrun_home / "jobs" / "hostile_1" / "bindings.json"
    data = json.loads(bindings.read_text())
    data["outputs"]["model"] = str(output.parent / "model2")
    bindings.chmod(0o644)
    bindings.write_text(json.dumps(data))
    linked = run_cli("model", "create", "-n", "m3", "-p", "azureml://jobs/hostile_1/outputs/model")
    assert linked.returncode != 0 and "symbolic link" in linked.stderr and "Traceback" not in linked.stderr
    assert not (distrun_home / "models" / "m3").exists() or not any((distrun_home / "models" / "m3").iterdir())
