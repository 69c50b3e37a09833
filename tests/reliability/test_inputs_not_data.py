"""Inputs that are not data (class 3).

A `download` input that is a device, a named pipe or a socket is refused, as the code snapshot
refuses them (a pipe would block the copy forever, /dev/zero would fill the disk); a code folder
that holds DISTRUN_HOME (and so the job folder being written) does not copy itself; a symbolic
link loop in the code folder is a clear error.
"""

from __future__ import annotations

import os
import socket

import pytest

from support.reliability import assert_refused, run_capped


def _input_job(folder, path: str, kind: str = "uri_file") -> str:
    job = folder / "job.yml"
    job.write_text(f"command: cat ${{{{inputs.data}}}} | head -c 10\ninputs:\n  data:\n    type: {kind}\n")
    with job.open("a") as handle:
        handle.write(f"    path: {path}\n    mode: download\n")
    return str(job)


@pytest.fixture
def unix_socket(tmp_path):
    path = tmp_path / "data.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    yield path
    sock.close()


def test_a_download_input_that_is_a_named_pipe_is_refused(distrun_home, tmp_path):
    fifo = tmp_path / "data.fifo"
    os.mkfifo(fifo)
    done = run_capped(distrun_home, "run", _input_job(tmp_path, str(fifo)))
    assert_refused(done, "job.yml:5:5: inputs.data.path:", f"{fifo} is a named pipe, not data")
    assert not (distrun_home / "jobs").exists()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_download_input_that_is_a_device_is_refused(distrun_home, tmp_path, device):
    done = run_capped(distrun_home, "run", _input_job(tmp_path, device))
    assert_refused(done, "inputs.data.path:", f"{device} is a character device, not data")
    assert not (distrun_home / "jobs").exists()


def test_a_download_input_that_is_a_socket_is_refused(distrun_home, tmp_path, unix_socket):
    done = run_capped(distrun_home, "run", _input_job(tmp_path, str(unix_socket)))
    assert_refused(done, "inputs.data.path:", "is a socket, not data")


def test_a_download_folder_holding_a_pipe_or_a_device_is_refused_not_copied(distrun_home, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ok.txt").write_text("ok\n")
    os.mkfifo(data / "stuck.fifo")
    done = run_capped(distrun_home, "run", _input_job(tmp_path, str(data), "uri_folder"))
    assert_refused(done, f"{data / 'stuck.fifo'} is a named pipe, not a regular file")
    (data / "stuck.fifo").unlink()
    os.mknod(data / "zero", 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero
    done = run_capped(distrun_home, "run", _input_job(tmp_path, str(data), "uri_folder"))
    assert_refused(done, f"{data / 'zero'} is a character device, not a regular file")


def test_a_code_folder_holding_distrun_home_does_not_copy_itself(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('trained')\n")
    (project / "job.yml").write_text("command: python train.py && ls\ncode: .\n")
    home = project / ".distrun-home"
    done = run_capped(home, "run", str(project / "job.yml"), "--name", "selfish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "trained" in done.stdout
    code = home / "jobs" / "selfish" / "code"
    assert (code / "train.py").is_file()
    assert not (code / ".distrun-home").exists()
    again = run_capped(home, "run", str(project / "job.yml"), "--name", "selfish2")  # with a job folder inside
    assert again.returncode == 0, again.stdout + again.stderr
    # outputs/ and logs/ are made in the working folder when the ranks start, as on Azure ML
    assert sorted(os.listdir(home / "jobs" / "selfish2" / "code")) == ["job.yml", "logs", "outputs", "train.py"]


def test_a_code_folder_that_is_distrun_home_itself_does_not_copy_its_jobs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "train.py").write_text("print('trained')\n")
    (home / "job.yml").write_text("command: python train.py\ncode: .\n")
    first = run_capped(home, "run", str(home / "job.yml"), "--name", "one")
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_capped(home, "run", str(home / "job.yml"), "--name", "two")
    assert second.returncode == 0, second.stdout + second.stderr
    # outputs/ and logs/ are made in the working folder when the ranks start, as on Azure ML
    assert sorted(os.listdir(home / "jobs" / "two" / "code")) == ["job.yml", "logs", "outputs", "train.py"]


@pytest.mark.parametrize(
    "links",
    [{"a": "b", "b": "a"}, {"self": "self"}, {"deep/x": "../y", "y": "deep/x"}],
    ids=["two-links", "self-link", "through-a-folder"],
)
def test_a_symlink_loop_in_the_code_folder_is_a_clear_error(distrun_home, tmp_path, links):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n")
    for name, target in links.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).symlink_to(target)
    job = tmp_path / "job.yml"
    job.write_text("command: python train.py\ncode: src\n")
    done = run_capped(distrun_home, "run", str(job), "--name", "loop")
    assert_refused(done, "is a symbolic link loop", "code folder:")
