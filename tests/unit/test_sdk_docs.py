"""docs/sdk.md says what the SDK has and lacks: its two lists are read here against the package."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from distrun.sdk.client import MLClient

SDK_DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def section(title: str) -> str:
    text = SDK_DOC.read_text(encoding="utf-8")
    start = text.index(f"### {title}\n")
    rest = text[start + len(title) + 5 :]
    end = re.search(r"^#{1,3} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def bullets(text: str) -> list[str]:
    return [b.replace("\n", " ") for b in re.split(r"^- ", text, flags=re.MULTILINE)[1:]]


def missing_names() -> list[str]:
    """The backticked names before each bullet's first colon-space in 'Not there (yet)'."""
    names = []
    for bullet in bullets(section("Not there (yet)")):
        head = bullet.split(": ", 1)[0]
        names.extend(re.findall(r"`([^`]+)`", head))
    return names


def present(name: str, client: MLClient) -> bool:
    """Whether `name` (MLClient.attr, a module, or module.attr) is something the package has."""
    if name.startswith("MLClient."):
        # An operations group (`ml_client.jobs.get`), not any attribute: `MLClient.compute` is
        # also the target name given as MLClient(compute=...).
        return callable(getattr(getattr(client, name.split(".", 1)[1], None), "get", None))
    module_name, _, attr = name.rpartition(".")
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        pass  # not a module, or one that says it is not there (distrun.dsl)
    try:
        return hasattr(importlib.import_module(module_name), attr)
    except ImportError:  # no such module, or a name that says it is not there (`from distrun import dsl`)
        return False


def test_the_not_there_list_names_only_what_the_package_lacks(tmp_path: Path) -> None:
    names = missing_names()
    assert len(names) >= 8, names  # the list was read, not skipped
    client = MLClient(home=tmp_path)
    there = [name for name in names if present(name, client)]
    assert there == [], f"docs/sdk.md lists {there} as not there, but the SDK has them: update 'Not there (yet)'"


@pytest.mark.parametrize("operations", ["environments", "data"])
def test_the_operations_the_docs_describe_are_there(operations: str, tmp_path: Path) -> None:
    described = section("Environments, data and metrics")
    assert f"`ml_client.{operations}.create_or_update(" in described
    ops = getattr(MLClient(home=tmp_path), operations)
    assert all(callable(getattr(ops, verb)) for verb in ("create_or_update", "get", "list"))


def test_the_metrics_and_v1_environment_calls_the_docs_describe_are_there() -> None:
    from distrun.v1 import Environment, Run

    described = section("Environments, data and metrics")
    for name in re.findall(r"`Environment\.(\w+)`", described):
        assert callable(getattr(Environment, name)), name
    assert "`Run.get_context().log(name, value)`" in described and "`log_list`" in described
    assert callable(Run.get_context) and callable(Run.log) and callable(Run.log_list)


def failure_of(name: str, client: MLClient) -> BaseException:
    """What using `name` (MLClient.attr, or module.attr imported) raises."""
    if name.startswith("MLClient."):
        with pytest.raises(AttributeError) as raised:
            getattr(client, name.split(".", 1)[1])
        return raised.value
    module_name, _, attr = name.rpartition(".")
    with pytest.raises(ImportError) as raised:
        exec(f"from {module_name} import {attr}", {})
    return raised.value


def test_each_name_not_there_says_what_it_is_and_what_to_do_instead(tmp_path: Path) -> None:
    client = MLClient(home=tmp_path)
    names = [name for name in missing_names() if not name.endswith("Error")]
    assert {"distrun.entities.JobService", "distrun.v1.Model"} <= set(names)
    for name in names:
        message = str(failure_of(name, client))
        module, _, short = name.rpartition(".")
        # "distrun does not provide NAME[ (azure's name)]: it runs ..., not WHAT; WHAT TO DO", NAME
        # the name, or the module of it that distrun does not provide (distrun.automl.X: automl)
        said = rf"(MLClient\.)?({short}|{module.rpartition('.')[2]})"
        assert re.match(rf"distrun does not provide {said}\b.*: it runs .*, not .+; \w+", message), (
            name,
            message,
        )


def test_distrun_has_its_version_where_azure_ai_ml_keeps_its_own() -> None:
    import distrun
    from distrun._version import VERSION

    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    assert distrun.__version__ == VERSION
    pyproject = (SDK_DOC.parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'\nversion = "{VERSION}"\n' in pyproject
