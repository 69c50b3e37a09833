"""Parallel steps the engine tests run, and what they must append: written into a test's folder
(a folder of small files, an MLTable over two CSV files, the entry script), and the rows the
same entry script returns when one process runs it over the whole input at once.

The entry script works on both kinds of mini-batch: for a list of files it returns one row per
file (its name and the sum of its numbers, times the `--factor` program argument); for a
DataFrame, one row per table row (its id and value times the factor), as a DataFrame.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

ENTRY = """\
import argparse
import os
import sys

import pandas as pd

factor = None


def init():
    global factor
    parser = argparse.ArgumentParser()
    parser.add_argument("--factor", type=int)
    args, _ = parser.parse_known_args()
    factor = args.factor
    print(f"init on rank {os.environ.get('RANK', '-')}")
    print(f"warming up on rank {os.environ.get('RANK', '-')}", file=sys.stderr)


def run(mini_batch):
    if isinstance(mini_batch, pd.DataFrame):
        return pd.DataFrame({"id": mini_batch["id"], "scaled": mini_batch["value"] * factor})
    rows = []
    for path in mini_batch:
        with open(path) as f:
            total = sum(int(word) for word in f.read().split())
        rows.append(f"{os.path.basename(path)} {total * factor}")
    return rows
"""

FILES = 12  # the folder's files: 6 mini-batches of 2
TABLE_ROWS = 40  # the MLTable's rows, over two CSV files


def write_inputs(folder: Path) -> tuple[Path, Path, Path]:
    """(code folder, folder of files, MLTable folder) under `folder`."""
    code = folder / "src"
    code.mkdir(parents=True)
    (code / "score.py").write_text(ENTRY)
    files = folder / "files"
    files.mkdir()
    for n in range(FILES):
        (files / f"f{n:02d}.txt").write_text(f"{n} {n * 3}\n")
    table = folder / "table"
    table.mkdir()
    half = TABLE_ROWS // 2
    for part, start in (("a", 0), ("b", half)):
        rows = "".join(f"{i},{i * 10}\n" for i in range(start, start + half))
        (table / f"part_{part}.csv").write_text("id,value\n" + rows)
    (table / "MLTable").write_text(
        textwrap.dedent("""\
        paths:
          - pattern: ./part_*.csv
        transformations:
          - read_delimited:
              delimiter: ','
              encoding: utf8
        """)
    )
    return code, files, table


def parallel_step(input_name: str, input_type: str, path: str, batch: str, extra: str = "") -> str:
    """A 2-node x 2-process parallel step (YAML, under `jobs:`) over `path`, appending to `out`."""
    return textwrap.indent(
        textwrap.dedent(f"""\
        type: parallel
        inputs:
          {input_name}: {{type: {input_type}, path: {path}}}
        outputs:
          out: {{type: uri_file}}
        input_data: ${{{{inputs.{input_name}}}}}
        mini_batch_size: "{batch}"
        resources: {{instance_count: 2}}
        max_concurrency_per_instance: 2
        retry_settings: {{max_retries: 1, timeout: 30}}
        task:
          type: run_function
          code: ./src
          entry_script: score.py
          program_arguments: --factor 3
          append_row_to: ${{{{outputs.out}}}}
        """)
        + extra,
        "    ",
    )


def pipeline(folder: Path, compute: str = "local", extra: str = "") -> Path:
    """A pipeline of two parallel steps: over the folder of files (`files`) and the MLTable (`table`)."""
    write_inputs(folder)
    text = (
        f"type: pipeline\nsettings:\n  default_compute: {compute}\njobs:\n"
        + "  files:\n"
        + parallel_step("images", "uri_folder", "./files", "2", extra)
        + "  table:\n"
        + parallel_step("rows", "mltable", "./table", "100b", extra)
    )
    path = folder / "pipeline.yml"
    path.write_text(text)
    return path


def one_process_rows(folder: Path) -> dict[str, list[str]]:
    """What the entry script returns when one process runs it over each whole input, as the
    lines append_row_to holds (a DataFrame row's values joined by spaces)."""
    from distrun.data.mltable import read_dataframe

    spec = importlib.util.spec_from_file_location("parallel_test_entry", folder / "src" / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv, sys.argv = sys.argv, ["score.py", "--factor", "3"]
    try:
        module.init()
    finally:
        sys.argv = argv
    files = sorted(str(p) for p in (folder / "files").iterdir())
    frame = module.run(read_dataframe(folder / "table"))
    return {
        "files": list(module.run(files)),
        "table": [" ".join(str(v) for v in row) for row in frame.itertuples(index=False, name=None)],
    }


def appended(home: Path, job: str) -> list[str]:
    return (home / "jobs" / job / "named-outputs" / "out" / "out").read_text().splitlines()


def entry_stdout(home: Path, job: str, rank: int, per_node: int = 2) -> str:
    """What the entry script printed in process `rank`, from Azure ML's per-process log (docs/parallel.md)."""
    where = f"node{rank // per_node}/process{rank % per_node:03d}.stdout.txt"
    return (home / "jobs" / job / "code" / "logs" / "user" / "stdout" / where).read_text()
