"""The grammar of a container image reference (`[registry[:port]/]path[:tag][@digest]`).

distrun hands image names to other programs' command lines (podman, docker, a pod's spec): a
value outside this grammar (`--privileged`, `--volume=/etc:/x`, a space, a newline) would be read
there as an option or as something else than an image, so it is refused before anything starts.
The grammar is the one of the distribution project's reference package, which the engines use.
"""

from __future__ import annotations

import re

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
_MAX_NAME = 255  # the distribution project's limit on the name (without tag and digest)


def image_reference_problem(text: str) -> str | None:
    """Why `text` is not an image reference; None when it is one."""
    if not text:
        return "an image reference cannot be empty"
    if text.startswith("-"):
        return f"{text!r} is not an image reference: it starts with '-' and would be read as an option"
    if not _REFERENCE.fullmatch(text):
        return (
            f"{text!r} is not an image reference: expected [REGISTRY[:PORT]/]NAME[:TAG][@DIGEST], "
            "NAME in lowercase letters, digits and . _ - separators"
        )
    name = text.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    if len(name) > _MAX_NAME:
        return f"{text[:40]!r}... is not an image reference: its name is longer than {_MAX_NAME} characters"
    return None


IMAGE_HINT = "write an image such as mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest or python:3.11-slim"
