"""What distrun says once about a job on a compute type: keys it ignores, the environment it runs in.

`distrun plan` shows these among a backend's notes, and `distrun run` says them before the
stream; the backends build them when they render a job, so they live below the backends.
"""

from __future__ import annotations


def environment_note(environment: object) -> str | None:
    if environment is None:
        return None
    build = getattr(environment, "build", None)
    if not isinstance(environment, str) and getattr(environment, "conda_file", None) is None and build is not None:
        from distrun.environments.build_context import NOTE

        return NOTE.format(dockerfile=getattr(build, "dockerfile_path", None) or "Dockerfile")
    if _runs_in_own_environment(environment):
        return None
    import sys

    shown = environment if isinstance(environment, str) else "(inline environment)"
    return (
        f"local compute runs in this Python environment ({sys.executable}); "
        f"environment {shown} is kept for image-based backends"
    )


# Keys of the schema that distrun accepts and records but that nothing here acts on.
_UNUSED_KEYS = (
    ("services", ("services",)),
    ("identity", ("identity",)),
    ("queue_settings", ("queue_settings",)),
    ("resources.instance_type", ("resources", "instance_type")),
    ("resources.shm_size", ("resources", "shm_size")),
    ("resources.docker_args", ("resources", "docker_args")),
)


def unused_keys_note(spec: object, compute: str) -> str | None:
    """One line naming every key the job sets that has no meaning on `compute` (as the SDK
    notes ignored arguments once), or None."""
    given = []
    for shown, path in _UNUSED_KEYS:
        value: object = spec
        for part in path:
            value = getattr(value, part, None)
        if value is not None:
            given.append(shown)
    if not given:
        return None
    return f"{', '.join(given)}: no meaning on {compute} compute; recorded with the job, not used"


def local_notes(spec: object) -> list[str]:
    """What `run` and `plan` say once about a job on local compute."""
    notes = [environment_note(getattr(spec, "environment", None)), unused_keys_note(spec, "local")]
    return [note for note in notes if note]


def _runs_in_own_environment(environment: object) -> bool:
    """A conda_file, or a name config.yaml maps: the ranks run there, and the build says so."""
    if not isinstance(environment, str):
        return getattr(environment, "conda_file", None) is not None
    from distrun.environments.named import find_named
    from distrun.store.layout import distrun_home

    try:
        named = find_named(environment, distrun_home() / "config.yaml")
    except Exception:  # a broken config.yaml is reported where the job is validated
        return False
    return named is not None and ("conda_file" in named.body or "python" in named.body)
