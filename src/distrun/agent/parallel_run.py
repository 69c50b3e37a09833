"""distrun's parallel worker: what each process of a parallel step's gang runs
(`python -m distrun.agent.parallel_run ...`, the command `distrun.loading.parallel_step` writes).

Each process splits the input the same way (`parallel_batches`), starts the entry script's
process (`parallel_entry`: `init()` once), then takes mini-batches from the one queue, which
process 0 holds and serves to the others over TCP (`parallel_queue_server`), until none is
left: a slow process never holds the others back. A mini-batch
whose `run` raises, times out or returns nothing (None) is tried again, up to `max_retries`
times, in a new entry-script process when the last one hung or died. An `init()`
that fails stops the whole step at once, as does a failure count past its threshold (failed
mini-batches; failed items: those a `run` returned no row for). Process 0
then waits for the others, appends every returned row to `append_row_to`, and writes the
summary (`parallel_report`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from distrun.agent.parallel_batches import MiniBatch, Split, split_input
from distrun.agent.parallel_entry import Answer, EntryProcess
from distrun.agent.parallel_logs import EntryLogs
from distrun.agent.parallel_queue import Queue
from distrun.agent.parallel_queue_server import RemoteQueue, SharedQueue, serve
from distrun.agent.parallel_report import Progress, finish, leave_summaries, say_stop
from distrun.core.errors import DistrunError

INIT_TIMEOUT = 600.0  # seconds an entry script's import and init() may take


def arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """distrun's options, and the program arguments (after `--`) that go to the entry script."""
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, theirs = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(prog="python -m distrun.agent.parallel_run")
    parser.add_argument("--entry-script", required=True)
    parser.add_argument("--input-data", required=True)
    parser.add_argument("--input-type", default="auto")
    parser.add_argument("--files-per-batch", type=int)
    parser.add_argument("--bytes-per-batch", type=int)
    parser.add_argument("--partition-keys", default="")
    parser.add_argument("--max-retries", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--mini-batch-error-threshold", type=int, default=-1)
    parser.add_argument("--error-threshold", type=int, default=-1)
    parser.add_argument("--allowed-failed-percent", type=float)
    parser.add_argument("--logging-level", default="INFO")
    parser.add_argument("--append-row-to")
    parser.add_argument("--append-row-file-name", default="parallel_run_step.txt")
    return parser.parse_args(ours), theirs


class Worker:
    def __init__(self, options: argparse.Namespace, program_arguments: list[str], split: Split) -> None:
        self.options = options
        self.split = split
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        node = os.environ.get("NODE_RANK", "0")
        self.process_name = f"node {node} process {self.rank:03d}"
        self.job_dir = job_dir = Path(os.environ.get("DISTRUN_JOB_DIR") or ".").absolute()
        count = len(split.batches)
        self.scratch = job_dir / "parallel"  # this node's copy of the job folder: mini-batch files
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.logs = EntryLogs(job_dir)  # Azure ML's per-process logs, beside the rank's own
        self.entry = EntryProcess(Path(options.entry_script).absolute(), program_arguments, self.logs.streams_pair())
        self.local: Queue | None = None
        self.queue: SharedQueue | RemoteQueue
        host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0") or 0)
        if self.rank == 0:
            self.local = Queue(self.scratch, count)
            self.queue = SharedQueue(self.local, options, count)
            if self.world > 1:
                self.server = serve(self.queue, host, port)
            items = sum(batch.size for batch in split.batches)
            self.local.describe({"mini_batches": count, "unit": split.kind, "items": items})
            self.progress = Progress(self.local, count, job_dir)
        else:
            self.queue = RemoteQueue(host, port)

    def run(self) -> int:
        try:
            return self._run()
        finally:
            self.entry.close()
            self.logs.close()

    def _run(self) -> int:
        started = self.entry.start(INIT_TIMEOUT)
        if not started.ok:
            why = f"init() of the entry script failed in {self.process_name}:\n{started.error}"
            self.logs.error("init() failed", started.error)
            self.queue.stop(why)
            self.entry.close()
            return self._stopped(why)
        for index in self.queue.take(self.process_name):
            self._one(self.split.batches[index])
            if self.local is not None:
                self.progress.tick()
        self.entry.shutdown(self.options.timeout)
        if isinstance(self.queue, RemoteQueue):
            stopped = self.queue.stopped()
            self.queue.bye()
            return 0 if stopped is None else say_stop(self.queue, stopped)
        if self.queue.stopped() is not None:
            return self._stopped()
        assert self.local is not None
        others = self.world - 1
        return finish(self.local, self.progress, self.split, self.options, lambda: self.queue.gone >= others)

    def _stopped(self, why: str | None = None) -> int:
        """The step stopped: process 0 leaves the summaries of what ended; each says why."""
        if self.local is not None:
            leave_summaries(self.local, self.job_dir, None, self.options.append_row_file_name)
        return say_stop(self.queue, why)

    def _one(self, batch: MiniBatch) -> None:
        request = self._request(batch)
        tries = 1 + max(self.options.max_retries, 0)
        answer = Answer(False)
        for attempt in range(tries):
            if self.entry.process is None:  # the last one hung or died: a new one, init() again
                restarted = self.entry.start(INIT_TIMEOUT)
                if not restarted.ok:
                    answer = restarted
                    continue
            answer = self.entry.ask(request, self.options.timeout)
            if answer.ok or self.queue.stopped() is not None:
                break
            self.logs.error(f"mini-batch {batch.index}, try {attempt + 1} of {tries}", answer.error)
            print(
                f"[distrun parallel] mini-batch {batch.index} failed in {self.process_name} "
                f"(try {attempt + 1} of {tries}):\n{answer.error}",
                file=sys.stderr,
                flush=True,
            )
        if answer.ok:
            # Fewer rows than items: the missing items failed (error_threshold counts them), as on
            # Azure ML; the mini-batch itself succeeded and is not tried again.
            missing = max(batch.size - answer.count, 0)
            self.queue.done(batch.index, self.process_name, batch.size, answer.lines or [], missing)
            return
        record = {
            "mini_batch": batch.index,
            "process": self.process_name,
            "items": batch.size,
            "failed_items": batch.size - min(answer.count, batch.size),
            "tries": tries,
            "files": list(batch.files)[:20],
            "error": answer.error,
        }
        self.queue.failed(batch.index, record)  # past a threshold, the queue stops every process

    def _request(self, batch: MiniBatch) -> dict[str, object]:
        if batch.rows is None:
            return {"op": "run", "index": batch.index, "files": list(batch.files)}
        frame = self.split.frame.iloc[batch.rows[0] : batch.rows[1]].reset_index(drop=True)
        # JSON with its table schema: read back with the column types by any pandas since 0.20,
        # which a pickle of this pandas is not (the job's environment has its own pandas).
        path = self.scratch / f".frame.{os.getpid()}.json"
        frame.to_json(path, orient="table", index=False)
        attrs = {"partition_key_value": batch.partition} if batch.partition else {}
        return {"op": "run", "index": batch.index, "frame": str(path), "attrs": attrs}


def main(argv: list[str] | None = None) -> int:
    options, program_arguments = arguments(list(sys.argv[1:] if argv is None else argv))
    try:
        keys = tuple(k for k in options.partition_keys.split(",") if k)
        split = split_input(
            Path(options.input_data), options.input_type, options.files_per_batch, options.bytes_per_batch, keys
        )
    except DistrunError as exc:
        print(f"[distrun parallel] {exc.render()}", file=sys.stderr, flush=True)
        return 2
    if not split.batches:
        print(
            f"[distrun parallel] the input {options.input_data} holds nothing to run: no file, no row",
            file=sys.stderr,
            flush=True,
        )
        return 2
    return Worker(options, program_arguments, split).run()


if __name__ == "__main__":
    sys.exit(main())
