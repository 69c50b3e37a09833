"""Security boundaries: what a job file, an input value or a job's own processes can reach.

- input values never become shell syntax (property-based, and end to end);
- names cannot leave the job folder (../, absolute paths, NUL);
- the code snapshot does not follow symbolic links out of the code folder, and does not hang
  on special files;
- `logs`, `job stream` and `job download` never read outside the job folder, even when the
  job's own processes plant links there;
- job folders follow the user's umask and are never world-writable.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.spec.command_template import render_command
from support.cli import cli_env
from support.reliability import only_job, record, run_bytes

SHELL_EXAMPLES = int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "300"))

# ---------------------------------------------------------------- shell injection

NASTY = [
    "two words; touch {pwned}",
    "$(touch {pwned})",
    "`touch {pwned}`",
    "'; touch {pwned}; '",
    '"; touch {pwned}; "',
    "a\nb; touch {pwned}",
    "$RANK ${{inputs.other}} $[[ x ]]",
    "* ? [a-z] ~ {a,b}",
    "back\\slash\\",
    "",
]

text_without_nul = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=SHELL_EXAMPLES, deadline=None)
@given(value=text_without_nul, path=text_without_nul)
def test_any_input_or_output_value_reaches_the_program_as_one_argument(value: str, path: str) -> None:
    command = render_command(
        "printf '%s\\0' ${{inputs.value}} $[[--path ${{inputs.path}}]] ${{outputs.out}}",
        {"value": value, "path": "/data/" + path},
        {"out": "/jobs/x/" + path},
    )
    done = subprocess.run(["bash", "-c", command], capture_output=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\0")[:-1] == [
        value.encode(),
        b"--path",
        ("/data/" + path).encode(),
        ("/jobs/x/" + path).encode(),
    ]


def test_hostile_inputs_end_to_end(run_cli, write_job, distrun_home, tmp_path):
    pwned = tmp_path / "pwned"
    data = tmp_path / "d'ata $(touch pwned) `touch pwned` ;"  # a path's name can hold no '/'

    data.mkdir()
    (data / "f.txt").write_text("F")
    values = [v.replace("{pwned}", str(pwned)) for v in NASTY]
    inputs = "\n".join(f"  v{i}: {_yaml_quote(v)}" for i, v in enumerate(values))
    refs = " ".join(f"${{{{inputs.v{i}}}}}" for i in range(len(values)))
    job = write_job(
        f"""
command: python show.py {refs} ${{{{inputs.data}}}} ${{{{inputs.copied}}}} --set-value ${{{{inputs.extra}}}}
code: src
inputs:
{inputs}
  extra: placeholder
  other: 1
  data:
    type: uri_folder
    path: {_yaml_quote(str(data))}
  copied:
    type: uri_folder
    path: {_yaml_quote(str(data))}
    mode: download
""",
        {"show.py": "import json, sys\nprint(json.dumps(sys.argv[1:]))\n"},
    )
    hostile_set = f"$(touch {pwned}); `touch {pwned}`"
    result = run_bytes(distrun_home, "run", str(job), "--name", "hostile", "--set", f"inputs.extra={hostile_set}")
    assert result.returncode == 0, result.stdout + result.stderr
    import json

    line = next(x for x in result.stdout.splitlines() if x.startswith(b"[0/0] ["))
    argv = json.loads(line[len(b"[0/0] ") :])
    copied = distrun_home / "jobs" / "hostile" / "inputs" / "copied"
    assert argv == [*values, str(data), str(copied), "--set-value", hostile_set]
    assert (copied / "f.txt").read_text() == "F"
    assert not pwned.exists() and not (distrun_home / "jobs" / "hostile" / "code" / "pwned").exists()


def _yaml_quote(text: str) -> str:
    """A YAML double-quoted scalar holding exactly `text`."""
    import json

    return json.dumps(text)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["../escape", "..", "/etc", "a/../../b", "x\0y", ".hidden", "a" * 300])
def test_names_that_would_leave_the_job_folder_are_refused(run_cli, write_job, distrun_home, tmp_path, name):
    job = write_job("command: echo hi\n")
    args = ["run", str(job), "--name", name]
    if "\0" in name:  # a command line cannot carry NUL: it can only come from a file
        job.write_text(f"command: echo hi\nname: {_yaml_quote(name)}\n")
        args = ["run", str(job)]
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "name" in result.stderr
    assert not (distrun_home / "jobs").exists() or not any((distrun_home / "jobs").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) in (["job0"], ["home", "job0"])


@pytest.mark.parametrize(
    "verb",
    [
        ["job", "show", "../../etc"],
        ["logs", "../../etc"],
        ["job", "download", "/etc", "-p", "{dest}"],
        ["job", "cancel", "../x"],
        ["job", "stream", "..\0"],
    ],
)
def test_job_verbs_only_know_recorded_names(run_cli, write_job, distrun_home, tmp_path, verb):
    assert run_cli("run", str(write_job("command: echo hi\n")), "--name", "known").returncode == 0
    args = [a.replace("{dest}", str(tmp_path / "dest")) for a in verb]
    if any("\0" in a for a in args):
        args = [a.replace("\0", "") for a in args]
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no job named" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "dest").exists()


def test_download_output_name_cannot_climb(run_cli, write_job, distrun_home, tmp_path):
    job = write_job("command: echo hi > ${{outputs.model}}/x\noutputs:\n  model:\n")
    assert run_cli("run", str(job), "--name", "dl").returncode == 0
    for bad in ("../../code", "../named-outputs/model", "/etc", "model/../.."):
        result = run_cli("job", "download", "dl", "--output-name", bad, "-p", str(tmp_path / "dest"))
        assert result.returncode == 2 and "has no named output" in result.stderr, result.stderr
    assert not (tmp_path / "dest").exists()


# ---------------------------------------------------------------- code snapshot


def _snapshot_job(write_job, files=None):
    return write_job("command: ls -la\ncode: src\n", {"train.py": "print('hi')\n", **(files or {})})


@pytest.mark.parametrize(
    "make_link",
    [
        pytest.param(lambda src, out: os.symlink("/etc/hostname", src / "host"), id="absolute-outside"),
        pytest.param(lambda src, out: os.symlink("../secret.txt", src / "secret"), id="relative-outside"),
        pytest.param(lambda src, out: os.symlink(out, src / "outdir"), id="folder-outside"),
        pytest.param(
            lambda src, out: (os.symlink("hop2", src / "hop1"), os.symlink("../secret.txt", src / "hop2")),
            id="chain-leaving",
        ),
        pytest.param(lambda src, out: os.symlink("/dev/zero", src / "zero"), id="device-outside"),
    ],
)
def test_snapshot_refuses_links_out_of_the_code_folder(run_cli, write_job, distrun_home, make_link):
    job = _snapshot_job(write_job)
    (job.parent / "secret.txt").write_text("SECRET")
    outside = job.parent / "outside"
    outside.mkdir()
    (outside / "data").write_text("SECRET")
    make_link(job.parent / "src", outside)
    result = run_cli("run", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "outside the code folder" in result.stderr and "Traceback" not in result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Failed"
    copied = distrun_home / "jobs" / name / "code"
    assert b"SECRET" not in b"".join(p.read_bytes() for p in copied.rglob("*") if p.is_file() and not p.is_symlink())


def test_snapshot_keeps_inside_links_pointing_inside(run_cli, write_job, distrun_home):
    job = _snapshot_job(write_job, {"lib/util.py": "X = 1\n"})
    src = job.parent / "src"
    os.symlink("train.py", src / "relative.py")
    os.symlink(src / "train.py", src / "absolute.py")  # absolute, but inside the code folder
    os.symlink("lib", src / "lib_link")
    assert run_cli("run", str(job), "--name", "links").returncode == 0
    code = distrun_home / "jobs" / "links" / "code"
    for link in ("relative.py", "absolute.py", "lib_link"):
        target = (code / link).resolve()
        assert code.resolve() in target.parents, f"{link} -> {target} leaves the snapshot"
    assert (code / "absolute.py").read_text() == "print('hi')\n"
    (src / "train.py").write_text("changed after submission\n")
    assert (code / "absolute.py").read_text() == "print('hi')\n"  # the snapshot does not follow edits


def test_snapshot_of_a_named_pipe_is_refused_not_hung(run_cli, write_job, distrun_home):
    job = _snapshot_job(write_job)
    os.mkfifo(job.parent / "src" / "pipe")
    result = run_cli("run", str(job), timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pipe" in result.stderr and "not a regular file" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- logs and download

PLANT = """
    command: >-
      python plant.py
    code: src
    outputs:
      model:
"""
PLANTER = """
    import os, sys
    job = os.environ["DISTRUN_JOB_DIR"]
    secret_file, secret_dir = sys.argv[1], sys.argv[2]
    print("honest line", flush=True)
    os.symlink(secret_file, os.path.join(job, "user_logs", "zz_planted.txt"))
    os.symlink(secret_file, os.path.join("outputs", "planted_link"))
    os.symlink(secret_dir, os.path.join(os.environ["AZURE_ML_OUTPUT_model"], "planted_dir"))
"""


def test_links_planted_by_a_job_are_never_followed(run_cli, write_job, distrun_home, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-FILE\n")
    secret_dir = tmp_path / "secret_dir"
    secret_dir.mkdir()
    (secret_dir / "inside.txt").write_text("SECRET-DIR\n")
    job = write_job(
        PLANT.replace("plant.py", f"plant.py {secret} {secret_dir}"), {"plant.py": PLANTER, "outputs/.keep": ""}
    )
    result = run_cli("run", str(job), "--name", "planted")
    assert result.returncode == 0, result.stdout + result.stderr
    for args in (["logs", "planted"], ["logs", "planted", "--tail", "5"], ["job", "stream", "planted"]):
        shown = run_bytes(distrun_home, *args)
        assert shown.returncode == 0, shown.stderr
        assert b"honest line" in shown.stdout
        assert b"SECRET" not in shown.stdout, args
    dest = tmp_path / "dest"
    downloaded = run_cli("job", "download", "planted", "-p", str(dest), "--all")
    assert downloaded.returncode == 0, downloaded.stderr
    copied = [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()]
    assert all(b"SECRET" not in p.read_bytes() for p in copied)
    link = dest / "artifacts" / "outputs" / "planted_link"
    assert link.is_symlink()  # kept as the link the job made, never read through
    assert secret.read_text() == "SECRET-FILE\n" and sorted(os.listdir(secret_dir)) == ["inside.txt"]


def test_a_job_replacing_its_folders_with_links_cannot_redirect_logs_or_download(
    run_cli, write_job, distrun_home, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "std_log_process_00.txt").write_text("SECRET-LOG\n")
    (outside / "loot.txt").write_text("SECRET-OUT\n")
    job = write_job(
        f"""
        command: >-
          echo honest; cd "$DISTRUN_JOB_DIR" && mv user_logs real_logs && ln -s {outside} user_logs
          && rm -rf code/outputs && ln -s {outside} code/outputs
        code: src
        """
    )
    result = run_cli("run", str(job), "--name", "swapped")
    assert result.returncode == 0, result.stdout + result.stderr
    for args in (["logs", "swapped"], ["logs", "swapped", "--rank", "0"], ["job", "stream", "swapped"]):
        shown = run_bytes(distrun_home, *args)
        assert b"SECRET" not in shown.stdout + shown.stderr, args
        assert b"Traceback" not in shown.stderr
    dest = tmp_path / "dest"
    downloaded = run_cli("job", "download", "swapped", "-p", str(dest))
    assert downloaded.returncode == 2 and "Traceback" not in downloaded.stderr
    assert f"code/outputs leads to {outside}, outside the job folder" in downloaded.stderr
    copied = [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()] if dest.exists() else []
    assert all(b"SECRET" not in p.read_bytes() for p in copied)


# ---------------------------------------------------------------- permissions


def _modes(root: Path) -> dict[str, int]:
    modes = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        if not path.is_symlink():
            modes[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return modes


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o000])
def test_job_folders_follow_the_umask_and_are_never_world_writable(write_job, distrun_home, umask):
    job = write_job(
        "command: echo hi > outputs/made.txt\ncode: src\noutputs:\n  model:\n",
        {"train.py": "", "outputs/.keep": "", "pkg/mod.py": ""},
    )
    os.chmod(job.parent / "src" / "train.py", 0o666)  # a world-writable source file
    done = subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(job), "--name", "modes"],
        capture_output=True,
        env=cli_env(distrun_home),
        preexec_fn=lambda: os.umask(umask),
    )
    assert done.returncode == 0, done.stderr
    modes = _modes(distrun_home)
    written = {p: m for p, m in modes.items() if not p.startswith("jobs/modes/code/outputs/made")}
    for path, mode in written.items():
        assert not mode & 0o002, f"{path} is world-writable ({oct(mode)}) under umask {oct(umask)}"
        assert not mode & umask & 0o777, f"{path} has bits the umask removes ({oct(mode)}, {oct(umask)})"
    assert modes["jobs/modes/user_logs/std_log_process_00.txt"] & 0o600 == 0o600
    # What the job's own process wrote follows the umask it inherited: distrun does not change it.
    assert modes["jobs/modes/code/outputs/made.txt"] == 0o666 & ~umask
