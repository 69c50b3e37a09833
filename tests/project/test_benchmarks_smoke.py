"""The benchmark harness works: its line checker finds damage, and a tiny run writes a report.

Nothing here is timed: figures belong to `python -m benchmarks` and benchmarks/RESULTS.md.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from support.cli import REPO

sys.path.insert(0, str(REPO))

from benchmarks.__main__ import CASES
from benchmarks.line_check import check_rank, check_stream
from benchmarks.workloads.numbered_lines import line, lines_for

from distrun.agent.line_stream import LineStream
from distrun.loading.loader import load_job_data
from distrun.plan import build_plan
from distrun.plan.model import Bindings, Placement


def test_numbered_lines_are_whole_lines_of_the_asked_size():
    data, count = lines_for(3, 5000)
    assert len(data) >= 5000 and data.endswith(b"\n")
    assert data.count(b"\n") == count
    assert data.startswith(line(3, 0)) and data.endswith(line(3, count - 1))


def test_intact_output_passes():
    data, count = lines_for(0, 3000)
    check = check_rank(data, 0, data, count)
    assert check.damaged == 0 and check.intact == count


def test_a_line_cut_in_two_counts_as_split_not_lost():
    data, count = lines_for(0, 3000)
    third = line(0, 0) + line(0, 1)
    cut = len(third) + 7  # inside record 2
    damaged = data[:cut] + b"\n" + data[cut:]
    check = check_rank(damaged, 0, data, count)
    assert check.split == 2 and check.lost == 0 and check.fused == 0
    assert check.intact == count - 1


def test_two_lines_glued_count_as_fused():
    data, count = lines_for(1, 3000)
    first = line(1, 0)
    damaged = data[: len(first) - 1] + data[len(first) :]  # the newline after record 0 is gone
    check = check_rank(damaged, 1, data, count)
    assert check.fused == 1 and check.lost == 0 and check.intact == count - 2


def test_a_missing_line_is_lost():
    data, count = lines_for(2, 3000)
    first = line(2, 0)
    check = check_rank(data[len(first) :], 2, data, count)
    assert check.lost == 1 and check.split == 0 and check.fused == 0


def test_stream_groups_lines_by_label_and_finds_mislabelled_ones():
    a, na = lines_for(0, 2000)
    b, nb = lines_for(1, 2000)
    expected = {0: (a, na), 1: (b, nb)}
    labels = {b"[0/0] ": 0, b"[0/1] ": 1}
    # Interleaved whole lines, plus the tool's own text, are fine.
    stream = b"RunId: x\n"
    for la, lb in zip(a.splitlines(keepends=True), b.splitlines(keepends=True), strict=True):
        stream += b"[0/0] " + la + b"[0/1] " + lb
    check, stray = check_stream(stream, labels, expected)
    assert check.damaged == 0 and check.intact == na + nb and stray == 1
    # Rank 1's first line under rank 0's label: lost to rank 1, mislabelled in rank 0's lines.
    swapped = stream.replace(b"[0/1] " + line(1, 0), b"[0/0] " + line(1, 0), 1)
    check, _ = check_stream(swapped, labels, expected)
    assert check.mislabelled == 1 and check.lost == 1


def test_live_stream_labels_every_line_whatever_the_chunks():
    """LineStream.feed (B4's hot path) cuts chunks anywhere into whole, labelled lines."""
    rng = random.Random(7)
    texts = {key: b"".join(line(rank, seq) for seq in range(300)) for rank, key in enumerate("ab")}
    out = io.BytesIO()
    stream = LineStream(out)
    for rank, key in enumerate("ab"):
        stream.add(key, f"0/{rank}")
    offsets = dict.fromkeys(texts, 0)
    while any(offsets[k] < len(texts[k]) for k in texts):
        key = rng.choice([k for k in texts if offsets[k] < len(texts[k])])
        size = rng.choice([1, 7, 50, 300, 4096])
        stream.feed(key, texts[key][offsets[key] : offsets[key] + size])
        offsets[key] += size
    stream.feed("a", b"no newline at the end")
    stream.finish("a")
    stream.finish("b")
    lines = out.getvalue().splitlines(keepends=True)
    for rank, key in enumerate("ab"):
        mine = [ln[len(f"[0/{rank}] ") :] for ln in lines if ln.startswith(f"[0/{rank}] ".encode())]
        expected = texts[key] + (b"no newline at the end\n" if key == "a" else b"")
        assert b"".join(mine) == expected
    assert len(lines) == 601


@pytest.mark.parametrize(
    "distribution",
    [{"type": "pytorch", "process_count_per_instance": 3}, {"type": "mpi", "process_count_per_instance": 2}],
)
def test_plan_to_dict_is_what_asdict_gives(distribution):
    """LaunchPlan.to_dict skips asdict's deep copies (B5's hot path); the result is the same."""
    data = {"command": "python train.py", "resources": {"instance_count": 2}, "distribution": distribution}
    job = load_job_data(data, Path(".")).spec
    placement = Placement(hosts=("10.0.0.1", "10.0.0.2"), master_port=29500, job_dir="/jobs/j", run_id="j")
    plan = build_plan(job, placement, Bindings(outputs={"model": "/jobs/j/out"}))
    plain = plan.to_dict()
    assert plain == asdict(plan)
    assert json.dumps(plain, indent=2) == json.dumps(asdict(plan), indent=2)


# The cases whose tiny run is mostly an engine's start: Ray's submit beside a hand-written Ray
# script (B9, a Ray cluster started for the case: half a minute), the AutoML search beside FLAML
# (B15, half a minute of FLAML and LightGBM at its smallest) and Spark beside spark-submit (B16,
# JVMs). Their engines are proved by their own tests (tests/engines/ray,
# tests/engines/local/test_automl_local.py and test_local_spark.py); the harness, which these
# cases share with the others, is proved here.
ENGINE_CASES = ("B9", "B15", "B16")


@pytest.mark.slow
def test_tiny_run_of_the_harness_cases_writes_the_report(tmp_path):
    report = tmp_path / "RESULTS.md"
    cases = ",".join(key for key in CASES if key not in ENGINE_CASES)
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--tiny", "--reps", "1", "--no-setup", "--peers", "none"]
        + ["--cases", cases, "--results", str(report)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = report.read_text()
    for key in ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B10", "B11", "B12"):
        assert f"## {key}: " in text
    assert "crashed" not in text and "broken:" not in text, text
    assert "| case | method | metric | n | median | min | max | distrun/peer |" in text
    assert "- cpu: " in text and "- torch: " in text
    # B1 measured the issue's `distrun run` of one `true`, and the floor of its libraries beside it.
    assert "| 1 rank of true | libraries' floor | wall s |" in text
    assert "| B1 | distrun run of one true at most 0.12 s |" in text
    # B4's checker ran on distrun's per-rank files and stream and found every line whole.
    assert "0 lost, split or fused lines (per-rank files and live stream) | 0 at worst | met |" in text
    # B10 at its smallest (3 steps): the chain and the fan-out, each beside the same commands in a script.
    for case in ("3-step chain", "3-wide fan-out"):
        for method in ("distrun", "shell script"):
            assert f"| {case} | {method} | wall s | 1 |" in text, text
        assert f"| {case} | distrun | per step over the script s | 1 |" in text, text
    assert "| B10 | at most 0.3 s per step over the shell script in the chain |" in text
    # B11 at its smallest (4 trials): the sweep's trials beside the same commands in a shell loop.
    for method in ("distrun", "shell loop"):
        assert f"| 4 no-op trials, 4 at once | {method} | wall s | 1 |" in text, text
    assert "| 4 no-op trials, 4 at once | distrun | per trial over the loop s | 1 |" in text, text
    assert "| B11 | at most 0.3 s per trial over the shell loop |" in text
    assert not any(f"## {key}: " in text for key in ENGINE_CASES)
    # Every case was either measured or says why not.
    for section in text.split("\n## ")[2:]:
        assert "| distrun |" in section or "Skipped: " in section, section[:400]
    # B8 at its smallest (2 and 4 ranks): every curve has samples at every size, the checker found
    # every log line, and the raw figures, the report's section and the plots were written.
    raw = tmp_path / "curves" / "raw"
    figures = json.loads((raw / "b8.json").read_text())
    curves = {curve["name"]: curve["points"] for curve in figures["curves"]}
    launch = curves["launch: start to return, N x /bin/true (s)"]
    assert set(launch) == {"distrun", "bare loop"} and set(launch["distrun"]) == {"2", "4"}
    assert all(v > 0 for values in launch.values() for sample in values.values() for v in sample)
    running = curves["start until all N ranks run (s)"]["distrun"]
    assert all(0 < v < 120 for sample in running.values() for v in sample)
    fanout = curves["failure fan-out: failing exit to SIGTERM at every other rank (ms)"]["distrun"]
    assert set(fanout) == {"2", "4"} and all(0 < v < 60_000 for sample in fanout.values() for v in sample)
    fds = curves["supervisor open file descriptors"]["distrun"]
    assert all(v >= 3 for sample in fds.values() for v in sample)
    assert set(curves["plan + render 1024 x 8 (s)"]["distrun"]) == {"local", "slurm", "ray", "kubernetes"}
    assert set(curves["log throughput, writers at once (MB/s)"]) == {"distrun", "shell to files"}
    met = {target["goal"]: target["met"] for target in figures["targets"]}
    assert met["0 lost, split or fused log lines"] is True
    assert "## B8: growth curves" in text and "## Growth curves (B8)" in text
    assert "| ranks | 2 | 4 |" in text and "| bare loop | " in text
    plots = sorted((tmp_path / "curves").glob("b8-*.png"))  # matplotlib comes with the test extra (bench)
    assert len(plots) == len(figures["curves"]) and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)
    for plot in plots:
        assert f"(curves/{plot.name})" in text


def _python_m(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` from the repository root, its output kept."""
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_pipeline_steps_runs_source_trees_side_by_side_with_the_script():
    trees = ("--src", "src", "--src", "src")
    result = _python_m("benchmarks.pipeline_steps", *trees, "--shape", "fan-out", "--steps", "2", "--reps", "1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2-step fan-out, 1 samples each" in result.stdout
    assert result.stdout.count("  src: wall median ") == 2, result.stdout
    assert "  shell script: wall median " in result.stdout


def test_curves_section_replaces_its_old_self_and_keeps_the_hand_written_part():
    from benchmarks.curves_report import BEGIN, END, kept_block, replace_block
    from benchmarks.results import ANALYSIS_MARKER

    report = "# results\n\n## B1\n\ntable\n\n" + ANALYSIS_MARKER + "\nwhy B4 misses\n"
    first = replace_block(report, f"{BEGIN}\nold curves\n{END}\n")
    assert first.index("old curves") < first.index(ANALYSIS_MARKER) and first.endswith("why B4 misses\n")
    second = replace_block(first, f"{BEGIN}\nnew curves\n{END}\n")
    assert "old curves" not in second and second.count(BEGIN) == 1 and "new curves" in second
    assert "why B4 misses" in second and "## B1" in second
    assert kept_block(second).strip() == f"{BEGIN}\nnew curves\n{END}"
