"""Splitting mpirun's tagged output into per-rank logs, and reading which rank it blames.

The inputs are shaped like real Open MPI 4.1 output: mpirun tags every write of a rank, so a
line written in pieces (Python writes tracebacks that way when unbuffered) arrives as several
tagged pieces, interleaved with other ranks and with mpirun's own messages.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from distrun.agent.line_stream import LineStream
from distrun.agent.mpi_output import MpiOutput, failed_rank, launcher_message, launcher_program, missing_launcher
from distrun.plan.common import shell_argv
from distrun.plan.model import ProcessSpec
from distrun.plan.mpi import OUTPUT_DEMUX


class Demux:
    def __init__(self, tmp_path: Path, per_node: int = 2) -> None:
        self.dir = tmp_path
        self.out = io.BytesIO()
        stream = LineStream(self.out)
        stream.add("mpi_launcher", "mpirun")
        self.launcher_fd = os.open(tmp_path / "mpi_log.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self.output = MpiOutput(tmp_path, self.launcher_fd, stream, "mpi_launcher", per_node)

    def feed(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.output.feed(chunk)

    def close(self) -> None:
        self.output.finish()
        os.close(self.launcher_fd)

    def log(self, name: str) -> str:
        return (self.dir / name).read_text()

    def stream(self) -> list[str]:
        return self.out.getvalue().decode().splitlines()


def test_tagged_lines_go_to_their_rank_and_the_rest_to_mpi_log(tmp_path: Path) -> None:
    demux = Demux(tmp_path)
    demux.feed(
        b"[1,0]<stdout>:epoch 1\n[1,3]<stderr>:warning\n",
        b"mpirun noticed something\n[1,2]<stdout>:epoch 1\n",
    )
    demux.close()
    assert demux.log("std_log_process_00.txt") == "epoch 1\n"
    assert demux.log("std_log_process_02.txt") == "epoch 1\n"
    assert demux.log("std_log_process_03.txt") == "warning\n"
    assert demux.log("mpi_log.txt") == "mpirun noticed something\n"
    assert demux.stream() == ["[0/0] epoch 1", "[1/3] warning", "[mpirun] mpirun noticed something", "[1/2] epoch 1"]


def test_a_line_written_in_pieces_is_joined_per_rank(tmp_path: Path) -> None:
    # As captured: rank 2 writes "    ", "main()", "\n"; rank 3 completes a line in between.
    demux = Demux(tmp_path)
    demux.feed(
        b"[1,2]<stderr>:    [1,2]<stderr>:main()[1,3]<stderr>:Traceback (most recent call last):\n",
        b"[1,2]<stderr>:\n",
        b"[1,1]<stderr>:KeyError: [1,1]<stderr>:'AZ_BATCH_MASTER_NODE'\n",
    )
    demux.close()
    assert demux.log("std_log_process_02.txt") == "    main()\n"
    assert demux.log("std_log_process_03.txt") == "Traceback (most recent call last):\n"
    assert demux.log("std_log_process_01.txt") == "KeyError: 'AZ_BATCH_MASTER_NODE'\n"
    assert not (tmp_path / "mpi_log.txt").read_text()
    assert demux.output.traceback_order == [3]


def test_stdout_and_stderr_pieces_of_one_rank_do_not_mix(tmp_path: Path) -> None:
    demux = Demux(tmp_path)
    demux.feed(b"[1,0]<stdout>:loss [1,0]<stderr>:oops\n[1,0]<stdout>:0.5\n")
    demux.close()
    assert demux.log("std_log_process_00.txt") == "oops\nloss 0.5\n"


def test_chunks_split_anywhere_give_the_same_logs(tmp_path: Path) -> None:
    data = b"[1,0]<stdout>:a\n[1,1]<stdout>:b[1,0]<stdout>:c\n[1,1]<stdout>:\nown line\n"
    for cut in range(len(data)):
        folder = tmp_path / f"cut{cut}"
        folder.mkdir()
        demux = Demux(folder)
        demux.feed(data[:cut], data[cut:])
        demux.close()
        assert demux.log("std_log_process_00.txt") == "a\nc\n"
        assert demux.log("std_log_process_01.txt") == "b\n"
        assert demux.log("mpi_log.txt") == "own line\n"


def test_an_unterminated_last_line_is_kept(tmp_path: Path) -> None:
    demux = Demux(tmp_path)
    demux.feed(b"[1,0]<stdout>:nonl[1,1]<stdout>:out 1\n", b"[1,1]<stdout>:tail")
    demux.close()
    assert demux.log("std_log_process_00.txt") == "nonl\n"
    assert demux.log("std_log_process_01.txt") == "out 1\ntail\n"


def test_horovod_gloo_tags_are_understood(tmp_path: Path) -> None:
    demux = Demux(tmp_path, per_node=1)
    demux.feed(b"[1]<stdout>:hello\n")
    demux.close()
    assert demux.log("std_log_process_01.txt") == "hello\n"
    assert demux.stream() == ["[1/1] hello"]


EXITED = b"""\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[8627,1],2]
  Exit code:    3
--------------------------------------------------------------------------
"""
SIGNALLED = b"""\
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""
ABORTED = b"""\
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD
with errorcode 5.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
--------------------------------------------------------------------------
"""


def test_failed_rank_from_each_kind_of_mpirun_report() -> None:
    exited = failed_rank(EXITED)
    assert exited is not None and (exited.rank, exited.exit_code, exited.signal) == (2, 3, None)
    signalled = failed_rank(SIGNALLED)
    assert signalled is not None and (signalled.rank, signalled.signal) == (1, "SIGKILL")
    aborted = failed_rank(ABORTED)
    assert aborted is not None and (aborted.rank, aborted.exit_code) == (3, 5)
    assert "MPI_Abort" in aborted.how
    assert failed_rank(b"all good\n") is None


def test_the_first_report_wins() -> None:
    report = failed_rank(ABORTED + SIGNALLED)
    assert report is not None and report.rank == 3


def test_launcher_message_is_the_last_box() -> None:
    text = b"--------------------------------------------------------------------------\n"
    text += b"There are not enough slots available in the system\n"
    text += b"--------------------------------------------------------------------------\n"
    assert launcher_message(text) == "There are not enough slots available in the system"


def _launcher(argv: tuple[str, ...]) -> ProcessSpec:
    return ProcessSpec(
        name="mpi_launcher",
        role="launcher",
        index=0,
        node_rank=0,
        local_rank=0,
        rank=None,
        argv=argv,
        env={},
        env_defaults={},
        cwd="/",
        log_name="mpi_log.txt",
        label="mpirun",
        output_demux=OUTPUT_DEMUX,
    )


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (("mpirun", "-np", "2", "bash", "-c", "python a.py"), "mpirun"),
        (shell_argv("horovodrun -np 4 --hostfile $AZUREML_MPI_HOSTFILE python t.py"), "horovodrun"),
        (shell_argv("cd x && mpiexec -n 2 a"), "mpiexec"),
    ],
)
def test_launcher_program(argv: tuple[str, ...], program: str) -> None:
    assert launcher_program(_launcher(argv)) == program


def test_missing_launcher_says_how_to_install_open_mpi(tmp_path: Path) -> None:
    spec = _launcher(("mpirun", "-np", "2", "true"))
    problem = missing_launcher(spec, {"PATH": str(tmp_path)})
    assert problem is not None
    assert "mpirun was not found on PATH" in problem and "apt-get install openmpi-bin" in problem
    (tmp_path / "mpirun").write_text("#!/bin/sh\n")
    (tmp_path / "mpirun").chmod(0o755)
    assert missing_launcher(spec, {"PATH": str(tmp_path)}) is None
    horovod = _launcher(shell_argv("horovodrun -np 2 python t.py"))
    assert "pip install horovod" in (missing_launcher(horovod, {"PATH": str(tmp_path)}) or "")
