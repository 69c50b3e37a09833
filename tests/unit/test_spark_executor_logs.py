"""Following a standalone cluster's executors' logs: what the driver's REST API and the workers'
/log/ endpoint answer, read as plain data; the label an executor's log has in `distrun logs`."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from distrun.backends.spark.executor_logs import (
    ExecutorLogs,
    Source,
    application_id,
    driver_ui,
    log_sources,
    parse_log_reply,
)
from distrun.store.log_labels import label_of_unplanned

WORKER = "http://10.0.0.7:8081/logPage/?appId=app-20261206204714-0000&executorId={}&logType={}"
EXECUTORS = [
    {"id": "driver", "executorLogs": {}},
    {"id": "0", "executorLogs": {"stdout": WORKER.format(0, "stdout"), "stderr": WORKER.format(0, "stderr")}},
    {"id": "1", "executorLogs": {"stderr": "file:///etc/passwd"}},  # only http is asked
    {"id": "../2", "executorLogs": {"stderr": WORKER.format(2, "stderr")}},  # not an executor id
]


def test_each_executors_stdout_and_stderr_are_read_from_its_workers_log_endpoint() -> None:
    sources = log_sources(EXECUTORS)
    assert [(s.executor_id, s.log_type) for s in sources] == [("0", "stdout"), ("0", "stderr")]
    assert sources[1].url == "http://10.0.0.7:8081/log/?appId=app-20261206204714-0000&executorId=0&logType=stderr"
    assert log_sources({"not": "a list"}) == [] and log_sources([1, None, {"id": 3}]) == []
    assert application_id([{"id": "app-20261206204714-0000", "name": "count.py"}]) == "app-20261206204714-0000"
    assert application_id([]) == application_id([{"id": "a b"}]) == ""


def test_a_reply_gives_the_next_offset_and_the_bytes() -> None:
    reply = b"==== Bytes 120-131 of 131 of /work/app-1/0/stderr ====\nmarker 1\nab"
    assert parse_log_reply(reply) == (131, b"marker 1\nab")
    assert parse_log_reply(b"<html>not a log</html>") is None
    assert (
        driver_ui("spark-submit --conf spark.ui.port=4041 --conf 'spark.ui.port=4050' a.py") == "http://127.0.0.1:4050"
    )
    assert driver_ui("spark-submit a.py") == ""


def test_an_executors_log_keeps_its_role_and_a_planted_link_is_not_written_through(tmp_path: Path) -> None:
    assert label_of_unplanned("std_log_executor_3.txt") == ("executor 3", 0)
    assert label_of_unplanned("notes.txt") == ("notes", 0)
    (tmp_path / "user_logs").mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"")
    os.symlink(elsewhere, tmp_path / "user_logs" / "std_log_executor_0.txt")
    shown: list[tuple[str, str, bytes]] = []
    follower = ExecutorLogs(tmp_path, "", lambda *said: shown.append(said))
    follower._keep(Source("0", "stderr", ""), b"marker\n")
    follower._keep(Source("1", "stdout", ""), b"marker\n")
    assert elsewhere.read_bytes() == b""
    assert (tmp_path / "user_logs" / "std_log_executor_1.txt").read_bytes() == b"marker\n"
    assert shown == [("std_log_executor_1.txt:stdout", "executor 1", b"marker\n")]


def test_a_worker_that_does_not_answer_is_left_for_the_next_pass(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    source = Source("0", "stderr", f"http://127.0.0.1:{port}/log/?appId=app-1&executorId=0&logType=stderr")
    follower = ExecutorLogs(tmp_path, f"http://127.0.0.1:{port}")
    assert follower._pass() is False  # no driver UI, no worker: nothing read, nothing raised
    assert follower._read(source) is False and (source.reached, source.offset) == (False, 0)
