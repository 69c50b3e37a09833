"""Where a job's data is on this machine: datastores, data assets, other jobs' outputs, URLs.

locations   an input's or output's path (azureml://..., azureml:NAME:V, http(s)://, s3://...)
            -> a local path, or a remote source to fetch
datastores  `azureml://datastores/<ds>/paths/<p>` -> $DISTRUN_HOME/datastores/<ds>/<p> or a
            folder set in config.yaml
assets      `distrun data create|list|show`: named, versioned references
http_fetch  http(s) inputs: downloaded once, resumable, cached by URL and validators
remote_fs   wasbs/abfss/s3/gs inputs through fsspec and its plugins
mirrors     config.yaml's url_mirrors: URL prefixes read from a local copy instead
"""
