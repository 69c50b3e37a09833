"""Python environments for a job's ranks: built from a `conda_file` with uv (or pip), cached
by content hash under DISTRUN_HOME, or named in config.yaml.

    conda_spec    a conda file -> the pip requirements and Python version distrun builds
    interpreters  which Python interpreters this machine has
    installer     uv (or the interpreter's venv + pip), and the commands each runs
    named         `environments:` in config.yaml (`distrun env create`)
    resolve       a job's `environment` -> what its ranks run in (checked before anything starts)
    builder       the build: lock, temporary folder, installer, atomic rename
    seal          a built environment read-only, and the digest that tells it was changed
    layer         each job's own writable layer over its built environment, where its pip installs
    store         the cache: list, show, prune
"""
