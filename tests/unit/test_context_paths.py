"""Paths a pip requirement line names, inside or outside a Docker build context."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.environments.context_paths import outside_context


@pytest.mark.parametrize(
    "line",
    [
        "numpy==1.26.4",
        "torch>=2; python_version >= '3.9'",
        "pkg @ https://example.com/pkg-1.0.whl",
        "git+https://github.com/org/repo@v1#egg=repo",
        "--index-url https://pypi.org/simple",
        "-f ./wheels",
        "./local_pkg",
        "{context}/wheels/x-1.0-py3-none-any.whl",
        "-e .",
        "wheels/x-1.0-py3-none-any.whl",
        "-c {context}/constraints.txt",
    ],
)
def test_lines_inside_the_context_or_off_this_machine_pass(tmp_path: Path, line: str) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    assert outside_context(line.format(context=context), context, context) is None


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("/etc/secret_pkg", "/etc/secret_pkg"),
        ("../outside", "../outside"),
        ("~/pkg", "~/pkg"),
        ("-f /srv/wheels", "/srv/wheels"),
        ("--find-links=/srv/wheels", "/srv/wheels"),
        ("--extra-index-url file:///srv/index", "/srv/index"),
        ("-i file:/srv/index", "/srv/index"),
        ("pkg @ file:///home/me/pkg", "/home/me/pkg"),
        ("-e /home/me/src", "/home/me/src"),
        ("-e git+file:///home/me/repo#egg=repo", "/home/me/repo"),
        ("-c /etc/constraints.txt", "/etc/constraints.txt"),
        ("${HOME}/pkg", "${HOME}/pkg"),
        ("sub/../../outside.whl", "sub/../../outside.whl"),
    ],
)
def test_lines_that_name_a_place_outside_the_context_say_which(tmp_path: Path, line: str, named: str) -> None:
    context = tmp_path / "ctx"
    (context / "sub").mkdir(parents=True)
    assert outside_context(line, context, context) == named


def test_a_link_in_the_context_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "escape").symlink_to("/etc")
    assert outside_context("./escape/pkg", context, context) == "./escape/pkg"
