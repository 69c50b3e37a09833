"""`distrun job download`: copy a finished job's artifacts and named outputs, like `az ml`.

    <path>/artifacts/outputs, logs          what processes wrote to ./outputs and ./logs
    <path>/artifacts/user_logs, system_logs
    <path>/named-outputs/<name>/
Symbolic links are copied as links, never followed, so nothing outside the job folder is read;
and nothing is written through a link found in the download folder (one that an earlier download
of another job copied there, say), so nothing outside it is written either. A link in the way of
a file or folder is an error; a link in place of a link is replaced, so a job downloads again
over its own earlier download. Named pipes, sockets and devices a job left are skipped, with a
note: copying one would block or never end.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, FILE_MODE, copied_mode
from distrun.core.job_kind import JobKind
from distrun.core.safe_files import kind_of, open_regular
from distrun.runner.jobs import get_job
from distrun.spec.pipeline_models import RESERVED_OUTPUTS
from distrun.store.layout import ARTIFACT_DIRS, Layout
from distrun.store.pipeline_outputs import PipelineOutput, pipeline_outputs


def download_job(layout: Layout, name: str, dest: Path, output_name: str | None, everything: bool) -> list[Path]:
    record = get_job(layout, name)
    if not record.terminal:
        raise DistrunError(
            f"job {name} is {record.status}; download works once it has ended", f"wait with `distrun job stream {name}`"
        )
    folder = layout.job(name)
    pairs: list[tuple[Path, Path]] = []
    if output_name in RESERVED_OUTPUTS:  # the job's artifact root: its artifacts, as Azure ML downloads it
        output_name, everything = None, False
    if output_name is None or everything:
        for sub in ARTIFACT_DIRS:
            pairs.append((folder.code / sub, dest / "artifacts" / sub))
        pairs.append((folder.user_logs, dest / "artifacts" / "user_logs"))
        pairs.append((folder.system_logs, dest / "artifacts" / "system_logs"))
    names = sorted(p.name for p in folder.named_outputs.iterdir()) if folder.named_outputs.is_dir() else []
    if output_name is not None:
        if output_name not in names:
            raise DistrunError(
                f"job {name} has no named output {output_name!r}", f"its outputs: {', '.join(names) or 'none'}"
            )
        names = [output_name]
    elif not everything:
        names = []
    for out in names:
        pairs.append((folder.named_output(out), dest / "named-outputs" / out))
    return _copy_pairs(layout, name, pairs, dest)


def _copy_pairs(layout: Layout, name: str, pairs: list[tuple[Path, Path]], dest: Path) -> list[Path]:
    """Each (folder of job `name`, place under `dest`) copied; a source that does not exist is left out."""
    folder = layout.job(name)
    written = []
    for source, target in pairs:
        if not source.exists():
            continue
        folder.inside(source)
        try:
            _download_folder(dest)
            for part in reversed(target.relative_to(dest).parents[:-1]):
                _folder_at(dest / part, dest)
            _copy_tree(source, target, dest)
        except OSError as exc:
            where = exc.filename or target
            raise DistrunError(
                f"cannot write {where}: {exc.strerror or exc}", "choose a folder you can write with -p"
            ) from None
        written.append(target)
    return written


def _download_folder(dest: Path) -> None:
    """The folder given with -p, made if missing (the user's own path: links in it are theirs)."""
    os.makedirs(dest, mode=DIR_MODE, exist_ok=True)
    if not dest.is_dir():
        raise DistrunError(f"{dest} is not a folder", "give -p a folder (it is created when missing)")


def _folder_at(path: Path, dest: Path) -> None:
    """A real folder at `path` inside the download folder (made if missing), never a link to one."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, DIR_MODE)
        return
    if not stat.S_ISDIR(info.st_mode):
        raise _in_the_way(path, kind_of(info.st_mode))


def _in_the_way(path: Path, what: str) -> DistrunError:
    return DistrunError(
        f"{path} is {what} (left by an earlier download?); distrun never writes through links, "
        "so this download cannot go there",
        "download into an empty folder, or remove it",
    )


def _copy_tree(source: Path, target: Path, dest: Path) -> None:
    """Copy `source` (never following its links) into `target`, never writing through a link."""
    _folder_at(target, dest)
    with os.scandir(source) as entries:
        children = sorted(entries, key=lambda e: e.name)
    for entry in children:
        src = Path(entry.path)
        out = target / entry.name
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            _replace_link(os.readlink(src), out)
        elif stat.S_ISDIR(mode):
            _copy_tree(src, out, dest)
        elif stat.S_ISREG(mode):
            _copy_file(src, out, mode)
        else:
            print(f"distrun: skipped {src}: {kind_of(mode)}, not a regular file", file=sys.stderr)


def _replace_link(pointing_to: str, out: Path) -> None:
    try:
        info = os.lstat(out)
    except FileNotFoundError:
        info = None
    if info is not None:
        if not stat.S_ISLNK(info.st_mode):
            raise _in_the_way(out, kind_of(info.st_mode))
        os.unlink(out)
    os.symlink(pointing_to, out)


def _copy_file(src: Path, out: Path, mode: int) -> None:
    try:
        info = os.lstat(out)
        if not stat.S_ISREG(info.st_mode):
            raise _in_the_way(out, kind_of(info.st_mode))
    except FileNotFoundError:
        pass
    reader = open_regular(src)
    try:
        writer = open_regular(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            while chunk := os.read(reader, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(writer, view) :]
            os.fchmod(writer, copied_mode(mode))
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def download_pipeline(layout: Layout, name: str, dest: Path, output_name: str | None, everything: bool) -> list[Path]:
    """A finished pipeline's steps, each as `download_job` downloads a job, into `<dest>/<step>/`.

    A reused step's are the earlier job's (its outputs are the step's). Steps that never ran are
    said and left out; with --output-name, only the steps that have that output."""
    from distrun.runner.pipelines import never_ran

    record = get_job(layout, name)
    if not record.terminal:
        raise DistrunError(
            f"pipeline {name} is {record.status}; download works once it has ended",
            f"wait with `distrun job stream {name}`, or download an ended step: distrun job download {name}/STEP",
        )
    written: list[Path] = []
    own = pipeline_outputs(record.steps)
    if output_name in own or everything:  # the pipeline's own outputs, by its names, as Azure ML has them
        for out in [output_name] if output_name in own else list(own):
            written.extend(_pipeline_output(layout, name, own[str(out)], dest))
        if output_name in own:
            return written
    having = []
    for step, state in (record.steps or {}).items():
        if never_ran(state):
            print(f"distrun: step {step} did not run: nothing to download", file=sys.stderr)
            continue
        job = str(state.get("job"))
        reserved = output_name in RESERVED_OUTPUTS  # every job has its artifact root
        if output_name is not None and not reserved and not layout.job(job).named_output(output_name).exists():
            continue
        having.append(step)
        written.extend(download_job(layout, job, dest / step, output_name, everything))
    if output_name is not None and not having:
        known = ", ".join(own) or "none"
        raise DistrunError(
            f"pipeline {name} has no output {output_name!r}, and none of its steps has one so named",
            f"the pipeline's outputs: {known}; see `distrun job show {name}`",
        )
    return written


def _pipeline_output(layout: Layout, pipeline: str, out: PipelineOutput, dest: Path) -> list[Path]:
    """The pipeline output `out` into `<dest>/named-outputs/<name>/`: the output of the step's job."""
    if out.status != "Completed":
        print(f"distrun: output {out.name} of pipeline {pipeline}: step {out.step} is {out.status}", file=sys.stderr)
    job = out.job
    record = get_job(layout, job)
    if record.kind is JobKind.SWEEP:  # a sweep step's outputs are its best trial's
        job = str(((record.sweep or {}).get("best") or {}).get("job") or "")
        if not job:
            raise DistrunError(
                f"output {out.name} of pipeline {pipeline} is the best trial's of sweep step {out.step}, "
                "and that sweep has no best trial",
                f"see its trials with `distrun job show {record.name}`",
            )
    source = layout.job(job).named_output(out.output)
    return _copy_pairs(layout, job, [(source, dest / "named-outputs" / out.name)], dest)
