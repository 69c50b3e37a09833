"""`azure.ai.ml.entities` for distrun: `from distrun.entities import PyTorchDistribution, ...`."""

from __future__ import annotations

from distrun.sdk import not_provided
from distrun.sdk.assets import Data
from distrun.sdk.command_job import Command, CommandJob, CreationContext
from distrun.sdk.components import CommandComponent, Component
from distrun.sdk.compute import AmlCompute, Compute
from distrun.sdk.distributions import (
    DistributionConfiguration,
    MpiDistribution,
    PyTorchDistribution,
    RayDistribution,
    TensorFlowDistribution,
)
from distrun.sdk.identities import AmlTokenConfiguration, ManagedIdentityConfiguration, UserIdentityConfiguration
from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.job_settings import (
    BuildContext,
    CommandJobLimits,
    Environment,
    JobResourceConfiguration,
    ResourceConfiguration,
)
from distrun.sdk.models import Model
from distrun.sdk.pipeline_job import PipelineJob, PipelineJobSettings
from distrun.sdk.spark_job import Spark, SparkJob
from distrun.sdk.workspaces import Workspace

__all__ = [
    "AmlCompute",
    "AmlTokenConfiguration",
    "BuildContext",
    "Command",
    "CommandComponent",
    "CommandJob",
    "CommandJobLimits",
    "Component",
    "Compute",
    "CreationContext",
    "Data",
    "DistributionConfiguration",
    "Environment",
    "Input",
    "JobResourceConfiguration",
    "ManagedIdentityConfiguration",
    "Model",
    "MpiDistribution",
    "Output",
    "PipelineJob",
    "PipelineJobSettings",
    "PyTorchDistribution",
    "RayDistribution",
    "ResourceConfiguration",
    "Spark",
    "SparkJob",
    "TensorFlowDistribution",
    "UserIdentityConfiguration",
    "Workspace",
]

# Classes of `azure.ai.ml.entities` distrun does not provide (yet) say what to do instead.
__getattr__ = not_provided.module_getattr(__name__, not_provided.ENTITIES, "azure.ai.ml.entities")
