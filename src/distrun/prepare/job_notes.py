"""What distrun says once about a job on a compute type: keys it ignores, the environment it runs in.

`distrun plan` shows these among a backend's notes, and `distrun run` says them before the
stream; the backends build them when they render a job, so they live below the backends.
"""

from __future__ import annotations

from typing import Any


def environment_note(environment: object) -> str | None:
    if environment is None:
        return None
    if isinstance(environment, str):
        named = named_in_config(environment)
        if named is None:  # not the user's own: a curated name, or one distrun does not know
            from distrun.environments.curated import curated_note

            return curated_note(environment)
        if "conda_file" in named.body or "python" in named.body:
            return None  # the ranks run there, and the build says so
        return _own_python_note(environment)
    build = getattr(environment, "build", None)
    if getattr(environment, "conda_file", None) is not None:
        return None
    if build is not None:
        from distrun.environments.build_context import NOTE

        return NOTE.format(dockerfile=getattr(build, "dockerfile_path", None) or "Dockerfile")
    return _own_python_note("(inline environment)")


def _own_python_note(shown: str) -> str:
    import sys

    from distrun.environments.own_layer import IN_OWN_LAYER

    return (
        f"local compute runs in this Python environment ({sys.executable}), {IN_OWN_LAYER}; "
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


def local_notes(spec: object, container_note: str | None = None) -> list[str]:
    """What `run` and `plan` say once about a job on local compute; `container_note`, where the
    job's image decides where it runs, says it instead of the environment note."""
    environment = container_note or environment_note(getattr(spec, "environment", None))
    notes = [environment, unused_keys_note(spec, "local")]
    return [note for note in notes if note]


def named_in_config(environment: str) -> Any:
    """config.yaml's entry for the name (the user's own mapping wins over a curated name), or None."""
    from distrun.environments.named import named_or_none
    from distrun.store.layout import distrun_home

    return named_or_none(environment, distrun_home() / "config.yaml")
