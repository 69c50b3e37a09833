"""distrun's Python SDK: Azure ML v2 (`azure.ai.ml`) and v1 (`azureml.core`) job code, run by distrun.

The public faces are `distrun` (command, Input, Output, MLClient, load_job), `distrun.entities`,
`distrun.constants`, `distrun.identity` and `distrun.v1`. Every SDK object only gathers plain
job data; the job is validated by the same loader as a YAML file and launched by the same
submission path and backends as the CLI.
"""
