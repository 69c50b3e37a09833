"""The node's GPU probe: `nvidia-smi` (a stand-in program on PATH) asked once per run, again on a later attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.prepare.machine_gpus import probe_gpus


def test_one_run_asks_the_driver_once_and_a_later_attempt_asks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nvidia-smi` starts NVML on every call (10-20 ms on a one-GPU machine): preflight, preview and
    first attempt share one listing, but a restart half a minute later sees the GPUs as they are."""
    from distrun.prepare import machine_gpus as local_gpus

    calls = tmp_path / "calls"

    def nvidia_smi(folder: str, answer: str) -> None:
        """A stand-in for the driver's tool in tmp_path/FOLDER, counting its calls, first on PATH."""
        program = tmp_path / folder / "nvidia-smi"
        program.parent.mkdir(exist_ok=True)
        program.write_text(f'#!/bin/sh\necho >> "{calls}"\n{answer}\n')
        program.chmod(0o755)
        monkeypatch.setenv("PATH", f"{program.parent}:/usr/bin:/bin")

    nvidia_smi("bin", 'printf "GPU 0: A (UUID: GPU-1)\\nGPU 1: B (UUID: GPU-2)\\n"')
    monkeypatch.setattr(local_gpus, "_last_listing", None)

    def asked() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    assert [probe_gpus({}) for _ in range(3)] == [("0", "1")] * 3
    assert asked() == 1
    assert probe_gpus({"CUDA_VISIBLE_DEVICES": "1"}) == ("1",) and asked() == 1  # CUDA's list: no driver call
    monkeypatch.setattr(local_gpus, "LISTING_REUSE_S", 0.0)  # the listing has aged, as before a restart
    assert probe_gpus({}) == ("0", "1") and asked() == 2
    monkeypatch.setattr(local_gpus, "LISTING_REUSE_S", 30.0)
    # Another tool on PATH is asked, not the old answer reused; it fails: no GPUs, asked once.
    nvidia_smi("other", "exit 9")
    assert probe_gpus({}) == () and probe_gpus({}) == () and asked() == 3
