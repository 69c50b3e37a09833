"""Every curated environment served by PyPI, resolved by `uv pip compile` against PyPI, from the
moment the test session starts (tests/surfaces/test_curated_resolution.py checks the results).

The resolutions wait on PyPI, not on this machine: some two minutes for the longest chain of
install steps. Run inside that module's fixture, they held one test worker idle all that time;
started by the session (`start`, from tests/conftest.py, once the tests to run are known) in a
process of their own, they overlap the other tests, and the fixture collects what they found
(`collected`). Where no session started them (the module run alone, a worker that cannot see
them), the fixture resolves them itself (`resolve_all`), as before.

    python tests/support/curated_prefetch.py OUT.json   # what the session starts
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS.parent / "src"))

from distrun.environments.curated import table  # noqa: E402
from distrun.environments.curated_resolution import (  # noqa: E402
    RESOLVE_TIMEOUT,
    NotResolved,
    Resolution,
    build_layers,
    resolve_curated,
)
from distrun.environments.installer import uv_binary  # noqa: E402

MODULE = "tests/surfaces/test_curated_resolution.py"
# The curated environments whose packages come partly from elsewhere than PyPI, which this
# machine cannot reach, and where from: `scripts/curated_environments.py --resolve-all`
# resolves them with that part left out (docs/environments-and-data.md has its dated output).
NOT_FROM_PYPI = {
    "acft-draft-model-training": "a git repository (SpecForge)",
    "acft-hf-nlp-gpu": "the PyTorch index",
    "acft-medimageinsight-adapter-finetune": "the PyTorch index",
    "acft-medimageinsight-embedding": "the PyTorch index",
    "acft-medimageparse-3d-finetune": "the PyTorch index",
    "acft-medimageparse-finetune": "the PyTorch index",
    "acft-mmdetection-image-gpu": "the PyTorch index",
    "acft-mmtracking-video-gpu": "the PyTorch index",
    "acft-multimodal-gpu": "the PyTorch index",
    "acpt-automl-image-framework-selector-gpu": "the PyTorch index",
    "acpt-pytorch-2.2-cuda12.1": "the PyTorch index",
    "acpt-pytorch-2.8-cuda12.6": "the PyTorch index",
    "ai-ml-automl-dnn-text-gpu": "the PyTorch index",
    "ai-ml-automl-dnn-text-gpu-ptca": "the onnxruntime-cuda-12 index of aiinfra.pkgs.visualstudio.com",
    "automl-gpu": "a spaCy model archive at aka.ms",
    "slime-pytorch-2.9-cuda12.8": "the PyTorch index",
}
RESOLVED = sorted(set(table()["environments"]) - set(NOT_FROM_PYPI))
WORKERS = 6  # the resolutions wait on PyPI, and their uv processes share the cores with the other tests
# The longest chain of install steps, RESOLVE_TIMEOUT each, at most: past that the prefetch is lost.
WAIT_S = RESOLVE_TIMEOUT * max(len(build_layers(name)[1]) for name in RESOLVED) + 60

FAILED = "(the prefetch failed)"  # its key in the results, with the traceback
Found = dict[str, Resolution | str]  # each environment's resolution, or why it did not resolve


def resolve_all(base: Path) -> Found:
    """Every environment of RESOLVED resolved at once, WORKERS at a time, each in its folder under `base`."""
    uv = uv_binary()  # once, before the threads: sysconfig's first reading is not thread-safe
    assert uv is not None, "uv is one of distrun's test dependencies"
    for name in RESOLVED:  # here, not in the threads
        (base / name).mkdir(parents=True)

    def one(name: str) -> Resolution | str:
        try:
            return resolve_curated(name, uv, base / name)
        except NotResolved as exc:
            return str(exc)

    # The longest chains of install steps first: they set the wall time.
    order = sorted(RESOLVED, key=lambda name: -len(build_layers(name)[1]))
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(order, pool.map(one, order), strict=True))


def results_path(session_pid: int) -> Path:
    """Where the prefetch of the session whose first process is `session_pid` writes (an xdist
    worker is that process's child)."""
    return Path(tempfile.gettempdir()) / f"distrun-tests-curated-{session_pid}.json"


def start(ids: list[str]) -> subprocess.Popen[bytes] | None:
    """The prefetch, in a session of its own, when `ids` (the tests to run) include the module's."""
    if not any(test.startswith(MODULE) for test in ids):
        return None
    out = results_path(os.getpid())
    out.unlink(missing_ok=True)
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(out)],
        stdout=subprocess.DEVNULL,
        stderr=(out.with_suffix(".log")).open("wb"),
        start_new_session=True,  # stopped with its uv processes at the session's end (`stop`)
    )


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """The prefetch and what it started, ended, and its files removed."""
    if process is None:
        return
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    out = results_path(os.getpid())
    out.unlink(missing_ok=True)
    out.with_suffix(".log").unlink(missing_ok=True)


def collected() -> Found | None:
    """What the session's prefetch found, waiting for it; None where none was started."""
    for pid in (os.getppid(), os.getpid()):  # an xdist worker's controller, or this process
        out = results_path(pid)
        log = out.with_suffix(".log")
        if not log.exists():
            continue
        give_up = time.monotonic() + WAIT_S
        while not out.exists():
            assert time.monotonic() < give_up, f"the curated prefetch wrote nothing in {WAIT_S:.0f} s: {log}"
            time.sleep(1)
        found = _read(out)
        assert FAILED not in found, f"the curated prefetch failed:\n{found[FAILED]}"
        return {name: value if isinstance(value, str) else _resolution(value) for name, value in found.items()}
    return None


def _read(out: Path) -> dict[str, object]:
    data = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(data, dict), data
    return data


def _resolution(value: object) -> Resolution:
    assert isinstance(value, dict), value
    fields = {**value, "replaced": tuple(value["replaced"]), "left_out": tuple(value["left_out"])}
    return Resolution(**fields)


def main(out: Path) -> int:
    try:
        with tempfile.TemporaryDirectory(prefix="distrun-curated-") as base:
            found = resolve_all(Path(base))
        plain: dict[str, object] = {
            name: value if isinstance(value, str) else dataclasses.asdict(value) for name, value in found.items()
        }
    except BaseException:  # said to the fixture, which would otherwise wait for the whole WAIT_S
        plain = {FAILED: traceback.format_exc()}
    partial = out.with_suffix(".partial")
    partial.write_text(json.dumps(plain), encoding="utf-8")
    partial.replace(out)  # whole or not at all: the fixture waits for the name
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
