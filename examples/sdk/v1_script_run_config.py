# %% [markdown]
# # A distributed PyTorch job from Python, Azure ML v1 style (`azureml.core`)
#
# Seed example "per-process launch": `PyTorchConfiguration(process_count=4, node_count=2)`,
# where `process_count` is the TOTAL number of processes. Coming from Azure ML, only the
# imports change:
#
#     from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig   ->  from distrun.v1 import ...
#     from azureml.core.runconfig import PyTorchConfiguration                         ->  from distrun.v1 import ...
#
# Run it as a script (`python examples/sdk/v1_script_run_config.py`) or cell by cell.

# %%
import tempfile
from pathlib import Path

from distrun.v1 import Environment, Experiment, PyTorchConfiguration, ScriptRunConfig, Workspace

project_folder = Path(__file__).resolve().parent.parent / "pytorch-ddp" / "src"  # train.py lives there

# %%
ws = Workspace.from_config()  # distrun needs no workspace; kept so the code runs unchanged
curated_env_name = "AzureML-PyTorch-1.6-GPU"
pytorch_env = Environment.get(workspace=ws, name=curated_env_name)  # local compute: this Python
distr_config = PyTorchConfiguration(process_count=4, node_count=2)

src = ScriptRunConfig(
    source_directory=project_folder,
    script="train.py",
    arguments=["--epochs", 1, "--model-dir", "outputs"],  # ./outputs is kept as the run's artifacts
    compute_target="local",
    environment=pytorch_env,
    distributed_job_config=distr_config,
)

# %%
run = Experiment(ws, "distrun-examples").submit(src)
details = run.wait_for_completion(show_output=True)  # raises distrun.JobFailedError if a rank fails
print("status:", details["status"])

# %%
print(run.get_file_names())
# A fresh folder, so running the example leaves nothing in the folder it was started from.
model_file = Path(tempfile.mkdtemp(prefix=f"{run.id}-")) / "model.pt"
run.download_file("outputs/model.pt", output_file_path=str(model_file))
print("model:", model_file, model_file.stat().st_size, "bytes")

# %% [markdown]
# ## Per-node launch
# The seed's other form runs `torch.distributed.launch` (or `torchrun`) once per node, which
# starts the processes of its node itself:
#
#     launch_cmd = ("python -m torch.distributed.launch --nproc_per_node 2 --nnodes 2 --node_rank $NODE_RANK "
#                   "--master_addr $MASTER_ADDR --master_port $MASTER_PORT --use_env train.py --epochs 1").split()
#     src = ScriptRunConfig(source_directory=project_folder, command=launch_cmd, compute_target="local",
#                           environment=pytorch_env, distributed_job_config=PyTorchConfiguration(node_count=2))
