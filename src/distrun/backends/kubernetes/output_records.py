"""A pod's outputs, carried back in its log: the records the pod agent writes, and their reassembly.

The pods of a job share no filesystem with the machine that runs `distrun`; the one channel
from a pod back to it is the pod's log, which `distrun` reads anyway (`collect`). So when a
pod's processes have ended, its agent packs what they wrote to the named outputs, `./outputs`
and `./logs` (`distrun.agent.output_archive`) and writes the archive to its log, before its
outcome record:

    distrun-outputs: {"bytes": N, "sha256": "..."}      the header
    distrun-outputs+ <base64 of up to CHUNK bytes>       as many lines as it takes

`distrun` keeps the header and appends each chunk to `k8s/outputs/<pod>.part` as it reads the
log (a log may be read in several looks), and once N bytes came, checks the digest and unpacks
the archive into the job folder. The outcome record comes after the archive in the same log,
so a job is never seen ended before its outputs are here. An archive over OUTPUTS_LIMIT is not
sent (a pod's log is rotated past about 10 MiB): the header then says why instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tarfile
from pathlib import Path

OUTPUTS_MARK = "distrun-outputs: "
CHUNK_MARK = "distrun-outputs+ "
OUTPUTS_LIMIT = 4 << 20  # compressed bytes a pod sends back through its log
CHUNK = 48 * 1024  # bytes per record: 64 KiB of base64, well under any log line limit


def output_records(archive: bytes) -> list[str]:
    """The log records (lines without their newline) that carry `archive`; none for an empty one."""
    if not archive:
        return []
    if len(archive) > OUTPUTS_LIMIT:
        why = (
            f"the outputs are {_size(len(archive))} compressed, more than the "
            f"{_size(OUTPUTS_LIMIT)} a pod's log carries back; write large outputs to a datastore output "
            "(path: azureml://datastores/<name>/paths/...) or a volume"
        )
        return [OUTPUTS_MARK + json.dumps({"skipped": why})]
    header = {"bytes": len(archive), "sha256": hashlib.sha256(archive).hexdigest()}
    chunks = (base64.b64encode(archive[at : at + CHUNK]).decode("ascii") for at in range(0, len(archive), CHUNK))
    return [OUTPUTS_MARK + json.dumps(header), *(CHUNK_MARK + chunk for chunk in chunks)]


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count / 1024:.1f} KiB"


def is_output_record(line: bytes) -> bool:
    return line.startswith((OUTPUTS_MARK.encode(), CHUNK_MARK.encode()))


def receive(line: bytes, pod: str, folder: Path, job_dir: Path) -> str | None:
    """Take one outputs record of `pod`'s log (`folder`: where partial archives are kept).

    Returns a line for the pod's log in `system_logs/` when something is to be said: the
    archive unpacked (and what it held that was left out), damaged, or not sent.
    """
    from distrun.core.file_modes import open_append, write_file_beneath
    from distrun.core.safe_files import read_regular, read_text

    header_path, part = folder / f"{pod}.json", folder / f"{pod}.part"
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    if text.startswith(OUTPUTS_MARK):
        try:
            header = json.loads(text[len(OUTPUTS_MARK) :])
            if "skipped" in header:
                return f"distrun: the outputs of pod {pod} were not brought back: {header['skipped']}"
            expected = {"bytes": int(header["bytes"]), "sha256": str(header["sha256"])}
        except (ValueError, KeyError, TypeError):
            return f"distrun: the outputs of pod {pod} were not brought back: their header is damaged"
        write_file_beneath(job_dir, header_path, json.dumps(expected).encode("utf-8"))  # never through a link
        write_file_beneath(job_dir, part, b"")  # a pod of the same name (a JobSet restart) starts its own archive
        return None
    try:
        expected = json.loads(read_text(header_path, root=job_dir))
        data = base64.b64decode(text[len(CHUNK_MARK) :], validate=True)
    except (OSError, ValueError, binascii.Error):
        return f"distrun: a piece of the outputs of pod {pod} was left out: no header before it, or damaged"
    fd = open_append(part, root=job_dir)
    try:
        os.write(fd, data)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size < expected["bytes"]:
        return None
    archive = read_regular(part, limit=OUTPUTS_LIMIT + CHUNK, root=job_dir)
    part.unlink()
    header_path.unlink()
    if len(archive) != expected["bytes"] or hashlib.sha256(archive).hexdigest() != expected["sha256"]:
        return f"distrun: the outputs of pod {pod} were not brought back: the archive came back damaged"
    from distrun.agent.output_archive import unpack_outputs

    try:
        left_out = unpack_outputs(archive, job_dir)
    except (tarfile.TarError, OSError, EOFError) as exc:
        return f"distrun: the outputs of pod {pod} could not be unpacked: {exc}"
    said = f"distrun: the outputs of pod {pod} were brought back into the job folder ({len(archive)} bytes compressed)"
    return said + "".join(f"\ndistrun: left out: {what}" for what in left_out)
