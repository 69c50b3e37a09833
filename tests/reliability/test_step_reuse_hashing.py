"""Step reuse hashes within bounds and never hands out content that changed: a sparse file of a
terabyte in an output is measured, not read (the step is not reused, and distrun says why), a
link loop ends, and a link in an output counts by what it leads to, so a changed target is not
reused as if unchanged."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from distrun.core.content_hash import DigestLimitError, DigestLimits, content_digest
from distrun.store.index import JobIndex


def _steps(home: Path, name: str) -> dict:
    return {r.name: r.to_dict() for r in JobIndex(home / "jobs.db").list(100)}[name]["steps"]


def test_a_sparse_terabyte_is_refused_at_once_not_read(tmp_path: Path) -> None:
    out = tmp_path / "job" / "outputs" / "model"
    out.mkdir(parents=True)
    with open(out / "sparse.bin", "wb") as sparse:
        sparse.truncate(1 << 40)
    started = time.monotonic()
    with pytest.raises(DigestLimitError, match="more than 32 GiB to read: distrun does not hash it"):
        content_digest(out, root=tmp_path / "job")
    with pytest.raises(DigestLimitError):
        content_digest(out / "sparse.bin")
    assert time.monotonic() - started < 5  # measured by its size, never read


def test_entries_and_bytes_are_bounded_and_a_link_loop_ends(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "up").symlink_to(tree)  # a loop through a link
    (tree / "a" / "f.txt").write_text("x" * 100)
    assert content_digest(tree) == content_digest(tree)  # it ends, and the same tree gives the same digest
    with pytest.raises(DigestLimitError, match="more than 99 bytes"):
        content_digest(tree, limits=DigestLimits(bytes=99))
    with pytest.raises(DigestLimitError, match="more than 2 files and folders"):
        content_digest(tree, limits=DigestLimits(entries=2))


def test_a_link_in_an_output_counts_by_its_targets_content(tmp_path: Path) -> None:
    job = tmp_path / "job"
    out = job / "outputs" / "model"
    out.mkdir(parents=True)
    target = tmp_path / "weights.bin"
    target.write_text("v1")
    (out / "weights.bin").symlink_to(target)
    (out / "shared").symlink_to(tmp_path / "data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("one")
    before = content_digest(out, root=job)
    target.write_text("v2")
    changed_file = content_digest(out, root=job)
    assert changed_file != before
    (tmp_path / "data" / "x.txt").write_text("two")
    assert content_digest(out, root=job) != changed_file


def _pipeline(folder: Path, make: str) -> Path:
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(
        textwrap.dedent(
            f"""\
            type: pipeline
            jobs:
              make:
                command: {json.dumps(make)}
                outputs:
                  out: {{type: uri_folder}}
              use:
                command: cat ${{{{inputs.d}}}}/data.txt > ${{{{outputs.r}}}}/r.txt
                inputs:
                  d: ${{{{parent.jobs.make.outputs.out}}}}
                outputs:
                  r: {{type: uri_folder}}
            """
        )
    )
    return pipeline


def test_a_changed_link_target_in_an_output_is_never_reused_as_unchanged(run_cli, distrun_home, tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("v1\n")
    pipeline = _pipeline(tmp_path, f"ln -s {target} ${{{{outputs.out}}}}/data.txt")
    first = run_cli("run", str(pipeline), "--name", "first")
    assert first.returncode == 0, first.stdout + first.stderr
    target.write_text("v2\n")
    second = run_cli("run", str(pipeline), "--name", "second")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "[make] not reused: the earlier run first.make cannot be reused: its output out changed" in second.stdout
    steps = _steps(distrun_home, "second")
    assert [(s["job"], s["reused"]) for s in steps.values()] == [("second.make", False), ("second.use", False)]
    used = distrun_home / "jobs" / "second.use" / "named-outputs" / "r" / "r.txt"
    assert used.read_text() == "v2\n"


def test_an_output_too_large_to_hash_is_not_reused_and_the_pipeline_says_so(run_cli, distrun_home, tmp_path):
    make = (
        "python -c \"import sys; open(sys.argv[1] + '/big.bin', 'wb').truncate(1 << 40)\" ${{outputs.out}}"
        " && echo hi > ${{outputs.out}}/data.txt"
    )
    pipeline = _pipeline(tmp_path, make)
    result = run_cli("run", str(pipeline), "--name", "big", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = distrun_home / "jobs" / "big.make" / "named-outputs" / "out"
    too_large = f"{out} holds more than 32 GiB to read: distrun does not hash it for step reuse"
    assert f"[make] cannot be reused later: {too_large}" in result.stdout
    assert f"[use] not reused: {too_large}" in result.stdout
    again = run_cli("run", str(pipeline), "--name", "again", timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    steps = _steps(distrun_home, "again")
    assert [(s["job"], s["reused"]) for s in steps.values()] == [("again.make", False), ("again.use", False)]
