"""Python environments for a job's ranks: built from a `conda_file` with uv (or pip), cached
by content hash under DISTRUN_HOME, or named in config.yaml.

    conda_spec    a conda file -> the pip requirements and Python version distrun builds
    interpreters  which Python interpreters this machine has
    installer     uv (or the interpreter's venv + pip), and the commands each runs
    named         `environments:` in config.yaml (`distrun env create`)
    resolve       a job's `environment` -> what its ranks run in (checked before anything starts)
    builder       the build: lock, temporary folder, installer, atomic rename
    store         the cache: list, show, prune
"""
