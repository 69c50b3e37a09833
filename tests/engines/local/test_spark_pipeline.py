"""A pipeline whose spark step (a spark component, as Microsoft's examples write one) prepares
data that a 2-node PyTorch step then trains on, on local compute."""

from __future__ import annotations

import textwrap
from pathlib import Path

from support.cli import distrun_cli
from support.jobs import record
from support.spark_jobs import SHORT_LIVED_JVM, TEXT, WORD_COUNT

COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/sparkComponent.schema.json
name: count_words
type: spark
version: 1
code: ./src
entry:
  file: count.py
inputs:
  text: {type: uri_file, mode: direct}
outputs:
  counts: {type: uri_folder, mode: direct}
args: --text ${{inputs.text}} --counts ${{outputs.counts}}
conf:
  spark.driver.cores: 1
  spark.driver.memory: 512m
  spark.executor.cores: 1
  spark.executor.memory: 512m
  spark.dynamicAllocation.enabled: True
  spark.dynamicAllocation.minExecutors: 1
  spark.dynamicAllocation.maxExecutors: 2
  spark.driver.extraJavaOptions: SHORT_LIVED_JVM
""".replace("SHORT_LIVED_JVM", SHORT_LIVED_JVM)

PIPELINE = """\
type: pipeline
jobs:
  prepare:
    type: spark
    component: ./count_words.yml
    inputs:
      text: {type: uri_file, path: ./text.txt, mode: direct}
    outputs:
      counts: {type: uri_folder, mode: direct}
  train:
    command: python train.py ${{inputs.counts}}
    code: ./train
    inputs:
      counts: ${{parent.jobs.prepare.outputs.counts}}
    resources: {instance_count: 2}
    distribution: {type: pytorch, process_count_per_instance: 1}
"""

TRAIN = """\
import os, sys
import torch
import torch.distributed as dist
words = 0
for name in sorted(os.listdir(sys.argv[1])):
    if name.startswith("part-") and name.endswith(".csv"):
        words += sum(int(line.split(",")[1]) for line in open(os.path.join(sys.argv[1], name)) if line.strip())
dist.init_process_group("gloo")
total = torch.tensor([float(words)])
dist.all_reduce(total)
print(f"rank {dist.get_rank()} read {words} words, all {int(total.item())}", flush=True)
dist.destroy_process_group()
"""


def test_a_spark_step_prepares_what_a_two_node_pytorch_step_trains_on(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "count.py").write_text(WORD_COUNT)
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "text.txt").write_text(TEXT)
    (tmp_path / "count_words.yml").write_text(COMPONENT)
    (tmp_path / "pipeline.yml").write_text(PIPELINE)
    home = tmp_path / "home"
    result = distrun_cli(home, "run", "--name", "prep_train", str(tmp_path / "pipeline.yml"), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    words = len(TEXT.split())
    assert f"[train] [0/0] rank 0 read {words} words, all {2 * words}" in result.stdout
    assert f"[train] [1/1] rank 1 read {words} words, all {2 * words}" in result.stdout
    assert result.stdout.index("[prepare] Completed") < result.stdout.index("[train] started as job")
    # the spark step's notes, as `distrun run` says a Spark job's, and its driver by its role
    assert "[prepare] note: Spark UI while the job runs: http://127.0.0.1:" in result.stdout
    assert "[prepare] [driver] executors 0" in result.stdout
    assert str(record(home, "prep_train.prepare")["kind"]) == "spark"
