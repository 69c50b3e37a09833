"""The process that runs a parallel step's entry script: `init()` once, `run(mini_batch)` for each
mini-batch it is sent, `shutdown()` at the end (docs/parallel.md).

It runs in the job's own Python environment (the `python` first on the rank's PATH), as the
entry script would on Azure ML, so it imports nothing of distrun: it is started by its path,
by distrun's worker (`distrun.agent.parallel_run`), which sends it one request per line on one
pipe and reads one answer per line on another; the script's own stdout and stderr are the
rank's. A table's mini-batch comes as a DataFrame in JSON with its table schema (read with
the job's pandas, whatever its version).

    {"op": "init", "entry": "/job/code/score.py", "argv": ["--model", "/in/model"]}
    {"op": "run", "files": ["/in/a.png", ...]}  |  {"op": "run", "frame": "/job/parallel/.frame.7.json", "attrs": {...}}
    {"op": "shutdown"}
    -> {"ok": true, "count": 2, "lines": ["a.png 7", ...]}  |  {"ok": false, "error": "Traceback ..."}
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import traceback
from typing import Any

FDS_VARIABLE = "DISTRUN_PARALLEL_FDS"  # "READ,WRITE": the request and answer pipes


def _load(entry: str, argv: list[str]) -> Any:
    sys.argv = [entry, *argv]
    folder = os.path.dirname(os.path.abspath(entry))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(entry))[0], entry)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the entry script {entry}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise AttributeError(f"the entry script {entry} defines no run(mini_batch) function")
    return module


def _lines(result: Any) -> tuple[int, list[str]]:
    """How many items `run` returned, and each as the line appended for it."""
    if hasattr(result, "itertuples") and hasattr(result, "columns"):  # a pandas DataFrame
        rows = [" ".join(str(value) for value in row) for row in result.itertuples(index=False, name=None)]
        return len(rows), rows
    if isinstance(result, (list, tuple)):
        return len(result), [str(item) for item in result]
    raise TypeError(f"run() returned {type(result).__name__}; it must return a list or a pandas DataFrame")


def _mini_batch(request: dict[str, Any]) -> Any:
    if "frame" not in request:
        return list(request["files"])
    import pandas

    frame = pandas.read_json(request["frame"], orient="table")
    frame.attrs.update(request.get("attrs") or {})
    return frame


class MiniBatchContext:
    """Azure ML's second argument of `run(mini_batch, mini_batch_context)`: which partition (with
    partition_keys) and which mini-batch this is."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.partition_key_value = dict((request.get("attrs") or {}).get("partition_key_value") or {})
        self.minibatch_index = request.get("index")


def _run(module: Any, request: dict[str, Any]) -> Any:
    mini_batch = _mini_batch(request)
    try:
        takes = len(inspect.signature(module.run).parameters)
    except (TypeError, ValueError):
        takes = 1
    if takes >= 2:
        return module.run(mini_batch, MiniBatchContext(request))
    return module.run(mini_batch)


def _answer(stream: Any, **fields: Any) -> None:
    stream.write(json.dumps(fields) + "\n")
    stream.flush()


def serve(requests: Any, answers: Any) -> None:
    module = None
    for line in requests:
        request = json.loads(line)
        try:
            if request["op"] == "init":
                module = _load(request["entry"], request["argv"])
                if callable(getattr(module, "init", None)):
                    module.init()
                _answer(answers, ok=True)
            elif request["op"] == "run":
                count, lines = _lines(_run(module, request))
                _answer(answers, ok=True, count=count, lines=lines)
            else:
                if module is not None and callable(getattr(module, "shutdown", None)):
                    module.shutdown()
                _answer(answers, ok=True)
                return
        except BaseException:  # the script's error, whatever it is, goes back with its traceback
            _answer(answers, ok=False, error=traceback.format_exc())
            if isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit)):
                return


def main() -> None:
    read_fd, write_fd = (int(fd) for fd in os.environ.pop(FDS_VARIABLE).split(","))
    with open(read_fd, encoding="utf-8") as requests, open(write_fd, "w", encoding="utf-8") as answers:
        serve(requests, answers)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder is distrun's, not the job's
    main()
