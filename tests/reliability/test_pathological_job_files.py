"""Pathological job files (class 9): clear errors, early and cheaply, never a traceback or a hang.

A job file that is a named pipe or a device, one with millions of keys, and names too long for
the filesystem are refused before anything is recorded, with distrun's own message.
"""

from __future__ import annotations

import os

import pytest

from support.reliability import assert_refused, run_capped


@pytest.mark.parametrize("verb", [["run"], ["job", "validate", "-f"], ["plan"]])
def test_a_job_file_that_is_a_named_pipe_is_refused_at_once(distrun_home, tmp_path, verb):
    fifo = tmp_path / "job.yml"
    os.mkfifo(fifo)
    done = run_capped(distrun_home, *verb, str(fifo), timeout=60)
    assert_refused(done, f"{fifo}", "is a named pipe, not a regular file")
    assert not (distrun_home / "jobs").exists()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_job_file_that_is_a_device_or_a_link_to_one_is_refused(distrun_home, tmp_path, device):
    done = run_capped(distrun_home, "run", device, timeout=60)
    assert_refused(done, "is a character device, not a regular file")
    link = tmp_path / "job.yml"
    link.symlink_to(device)
    done = run_capped(distrun_home, "job", "validate", "-f", str(link), timeout=60)
    assert_refused(done, "is a character device, not a regular file")


def test_a_job_file_with_millions_of_keys_is_refused_by_its_size(distrun_home, tmp_path):
    job = tmp_path / "job.yml"
    with job.open("w") as handle:
        handle.write("command: echo hi\ntags:\n")
        for i in range(2_000_000):
            handle.write(f"  k{i}: v\n")
    done = run_capped(distrun_home, "run", str(job))
    assert_refused(done, "job file is larger than", "a job file does not need that much data")


def test_a_small_job_file_with_too_many_values_is_refused_before_parsing(distrun_home, tmp_path):
    job = tmp_path / "job.yml"
    job.write_text("command: echo hi\nextra: [" + ",".join("1" * 400_000) + "]\n")
    assert job.stat().st_size < 1 << 20
    done = run_capped(distrun_home, "job", "validate", "-f", str(job))
    assert_refused(done, "more than 100000 values")


def test_an_output_name_too_long_for_the_filesystem_is_a_validation_error(distrun_home, tmp_path):
    long_name = "o" * 256
    job = tmp_path / "job.yml"
    job.write_text(f"command: echo hi\noutputs:\n  {long_name}:\n    type: uri_folder\n")
    done = run_capped(distrun_home, "run", str(job))
    assert_refused(done, f"job.yml:3:3: outputs.{long_name}:", "at most 255 characters")
    assert not (distrun_home / "jobs").exists()  # not a Failed job: nothing recorded


def test_an_input_name_too_long_for_the_filesystem_is_a_validation_error(distrun_home, tmp_path):
    long_name = "i" * 300
    (tmp_path / "data").mkdir()
    job = tmp_path / "job.yml"
    job.write_text(
        f"command: echo hi\ninputs:\n  {long_name}:\n    type: uri_folder\n    path: data\n    mode: download\n"
    )
    done = run_capped(distrun_home, "run", str(job))
    assert_refused(done, f"inputs.{long_name}:", "at most 255 characters")
    assert not (distrun_home / "jobs").exists()
