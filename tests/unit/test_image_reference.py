"""Image references: the grammar engines read, so that no value becomes one of their options."""

from __future__ import annotations

import pytest

from distrun.core.image_reference import image_reference_problem


@pytest.mark.parametrize(
    "image",
    [
        "python",
        "python:3.11-slim",
        "docker.io/library/python:3.11",
        "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest",
        "localhost:5000/team/trainer:v1.2_rc-3",
        "reg/distrun:test",
        "my-registry.example.com/a__b/c--d:TAG",
        "busybox@sha256:" + "a" * 64,
        "[::1]:5000/x:1",
    ],
)
def test_image_references_pass(image: str) -> None:
    assert image_reference_problem(image) is None


@pytest.mark.parametrize(
    ("image", "said"),
    [
        ("--privileged", "would be read as an option"),
        ("--volume=/etc:/x", "would be read as an option"),
        ("-v", "would be read as an option"),
        ("", "cannot be empty"),
        ("python 3", "is not an image reference"),
        ("Python:3", "is not an image reference"),
        ("python:3\n--privileged", "is not an image reference"),
        ("python:-x", "is not an image reference"),
        ("a/../b", "is not an image reference"),
        ("x" * 300, "longer than 255"),
    ],
)
def test_what_is_not_an_image_reference_is_refused_saying_why(image: str, said: str) -> None:
    problem = image_reference_problem(image)
    assert problem is not None and said in problem
