# %% [markdown]
# # A distributed PyTorch job from Python, Azure ML v2 style (`azure.ai.ml`)
#
# The same DDP training as `examples/pytorch-ddp/job.yml`, built with the v2 SDK's names.
# Coming from Azure ML, only the imports change:
#
#     from azure.ai.ml import command, Input, Output, MLClient       ->  from distrun import ...
#     from azure.ai.ml.entities import PyTorchDistribution           ->  from distrun.entities import ...
#     from azure.identity import DefaultAzureCredential              ->  from distrun.identity import ...
#
# Run it as a script (`python examples/sdk/v2_command_job.py`) or cell by cell.

# %%
import tempfile
from pathlib import Path

from distrun import Input, MLClient, Output, command
from distrun.entities import PyTorchDistribution
from distrun.identity import DefaultAzureCredential

CODE = Path(__file__).resolve().parent.parent / "pytorch-ddp" / "src"  # train.py lives there

# %% [markdown]
# ## The job: 2 nodes x 2 processes
# On local compute the 2 nodes are simulated on this machine; `compute="hpc"` (a target in
# `$DISTRUN_HOME/config.yaml`) would send the same job to a cluster.

# %%
job = command(
    code=CODE,
    command="python train.py --epochs ${{inputs.epochs}} --lr ${{inputs.lr}} --model-dir ${{outputs.model}}",
    inputs={"epochs": 1, "lr": Input(type="number", default=0.05)},
    outputs={"model": Output(type="uri_folder")},
    environment="azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest",
    instance_count=2,
    distribution=PyTorchDistribution(process_count_per_instance=2),
    display_name="pytorch-ddp-from-python",
    experiment_name="distrun-examples",
)

# %% [markdown]
# ## Submit, then follow it
# The workspace arguments are accepted and named once; `MLClient()` alone does the same.

# %%
ml_client = MLClient(DefaultAzureCredential(), "<subscription-id>", "<resource-group>", "<workspace>")
returned_job = ml_client.jobs.create_or_update(job)
print(f"submitted {returned_job.name} ({returned_job.status}); folder {returned_job.studio_url}")

# %%
ml_client.jobs.stream(returned_job.name)  # raises distrun.JobFailedError if a rank fails

# %% [markdown]
# ## The trained model
# Named outputs download to `<path>/named-outputs/<name>/`, as with `az ml job download`
# (here into a fresh temporary folder, so that running the example leaves nothing behind).

# %%
print("status:", ml_client.jobs.get(returned_job.name).status)
downloads = Path(tempfile.mkdtemp(prefix=f"{returned_job.name}-"))
ml_client.jobs.download(returned_job.name, download_path=downloads, output_name="model")
print("model:", sorted((downloads / "named-outputs" / "model").iterdir()))
