"""Whatever a user writes, the loader answers with a job or a `ValidationError`, never a crash.

Documents are drawn from the job vocabulary (so they reach deep into normalization and
validation), dumped as YAML and sometimes mangled character by character; `--set` strings
are drawn both from real key paths and from arbitrary text.
"""

from __future__ import annotations

import copy
import io
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from distrun.core.errors import ValidationError
from distrun.loading.loader import LoadedJob, load_job_data, load_job_file
from distrun.spec.models import JobSpec

EXAMPLES = int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOP_KEYS = [field.alias or name for name, field in JobSpec.model_fields.items()]
NESTED_KEYS = [
    "type",
    "path",
    "mode",
    "value",
    "default",
    "local_path",
    "image",
    "docker",
    "build",
    "target",
    "instance_count",
    "node_count",
    "instance_type",
    "infrastructure",
    "process_count",
    "process_count_per_instance",
    "worker_count",
    "parameter_server_count",
    "chief_count",
    "parameter_server",
    "timeout",
    "shm_size",
    "locations",
    "worker",
    "launcher",
    "chief",
    "count",
    "slots_per",
    "resources",
    "resource_limits",
    "environment",
    "environment_variables",
    "mpi",
    "pytorch",
    "tensorflow",
    "RANK",
    "MASTER_PORT",
    "1x",
    "a b",
    "",
]
WORDS = [
    "pytorch",
    "PyTorch",
    "TENSORFLOW",
    "mpi",
    "ray",
    "horovod",
    "command",
    "uri_file",
    "uri_folder",
    "mltable",
    "ro_mount",
    "download",
    "upload",
    "string",
    "number",
    "src",
    "./src",
    ".",
    "..",
    "/",
    "/nonexistent/x",
    "file:///tmp",
    "file://",
    "~",
    "~no_such_user_here/x",
    "azureml:env@latest",
    "azureml://datastores/d/paths/p",
    "https://example.invalid/x",
    "${{inputs.a}}",
    "${{outputs.o}}",
    "${{inputs.}}",
    "${{ inputs.a }} $[[--b ${{inputs.b}}]]",
    "{inputs.a}",
    "$[[",
    "]]",
    "${{",
    "2g",
    "8 GB",
    "local",
    "managed",
    "k8s",
    "a/b",
    "job\n",
    "\x00",
    "é",
    "٣",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=5),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(TOP_KEYS + NESTED_KEYS), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=20,
)


def _section(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A mapping shaped like a real section (three times in four), or any value at all."""
    shaped = st.fixed_dictionaries(required, optional=optional)
    return st.one_of(shaped, shaped, shaped, values)


counts = st.one_of(st.integers(min_value=-2, max_value=6), scalars)
distribution = _section(
    {"type": st.one_of(st.sampled_from(WORDS[:5]), scalars)},
    {
        "process_count_per_instance": counts,
        "process_count": counts,
        "worker_count": counts,
        "parameter_server_count": counts,
        "chief_count": counts,
        "parameter_server": values,
        "node_count": counts,
    },
)
worker = _section({}, {"count": counts, "slots_per": counts, "resources": values, "resource_limits": values})
distributed = st.one_of(
    st.dictionaries(
        st.sampled_from(["mpi", "pytorch", "tensorflow", "horovod"]),
        _section(
            {},
            {
                "worker": worker,
                "launcher": _section({}, {"resources": values}),
                "parameter_server": _section(
                    {},
                    {
                        "count": counts,
                        "environment": values,
                        "environment_variables": values,
                        "resource_limits": values,
                    },
                ),
                "chief": _section({}, {"count": counts}),
                "resource_limits": values,
            },
        ),
        max_size=2,
    ),
    values,
)
data_input = _section(
    {"path": st.one_of(st.sampled_from(WORDS), scalars)},
    {"type": st.one_of(st.sampled_from(["uri_file", "uri_folder", "string", "mltable"]), scalars), "mode": scalars},
)
good_commands = st.sampled_from(
    ["python train.py", "echo ${{inputs.a}} > ${{outputs.o}}", "run $[[--b ${{inputs.b}}]]", "echo {inputs.a}"]
)
common_keys = st.fixed_dictionaries(
    {"command": st.one_of(good_commands, good_commands, good_commands, st.sampled_from(WORDS), scalars, values)},
    optional={
        "code": st.one_of(st.sampled_from(WORDS), _section({}, {"local_path": scalars, "path": scalars}), values),
        "name": scalars,
        "type": scalars,
        "environment": _section({}, {"docker": _section({}, {"image": scalars, "build": values}), "image": scalars}),
        "environment_variables": values,
        "inputs": st.one_of(st.dictionaries(keys, st.one_of(data_input, scalars), max_size=3), values),
        "outputs": values,
        "compute": _section(
            {}, {"target": scalars, "instance_count": counts, "instance_type": scalars, "infrastructure": scalars}
        ),
        "resources": _section({}, {"instance_count": counts, "shm_size": scalars, "locations": values}),
        "limits": _section({}, {"timeout": scalars}),
        "tags": values,
        "junk": values,
    },
)
# A job has either the v2 `distribution` or the draft `distributed` section (rarely both).
random_documents = st.one_of(
    st.tuples(common_keys, st.fixed_dictionaries({}, optional={"distribution": distribution})),
    st.tuples(common_keys, st.fixed_dictionaries({"distributed": distributed})),
    st.tuples(common_keys, st.fixed_dictionaries({"distribution": distribution, "distributed": distributed})),
).map(lambda parts: {**parts[0], **parts[1]})

# Valid jobs of every form, to be broken in one to three places: most user errors are one slip.
small = st.integers(min_value=1, max_value=4)
valid_distribution = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["pytorch", "PyTorch", "mpi", "MPI"])}, optional={"process_count_per_instance": small}
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["tensorflow", "TensorFlow"])},
        optional={"worker_count": small, "parameter_server_count": small},
    ),
    st.fixed_dictionaries({"type": st.just("pytorch"), "process_count": st.sampled_from([2, 4, 8])}),
)
valid_worker = st.fixed_dictionaries({"count": small}, optional={"slots_per": small, "resource_limits": values})
valid_distributed = st.one_of(
    st.fixed_dictionaries(
        {"mpi": st.fixed_dictionaries({"worker": valid_worker}, optional={"launcher": st.just({"resources": {}})})}
    ),
    st.fixed_dictionaries(
        {"pytorch": st.fixed_dictionaries({"worker": valid_worker}, optional={"resource_limits": st.just({"gpu": 1})})}
    ),
    st.fixed_dictionaries(
        {
            "tensorflow": st.fixed_dictionaries(
                {"worker": valid_worker},
                optional={
                    "parameter_server": st.fixed_dictionaries(
                        {"count": small},
                        optional={
                            "environment": st.just({"docker": {"image": "python"}}),
                            "environment_variables": st.just({"A": 1}),
                        },
                    ),
                    "chief": st.just({"count": 1}),
                },
            )
        }
    ),
)
valid_core = st.fixed_dictionaries(
    {"command": good_commands},
    optional={
        "code": st.sampled_from(["src", "./src", {"local_path": "src"}, {"path": "src"}]),
        "name": st.sampled_from(["job-1", "a.b_c"]),
        "environment": st.sampled_from(["azureml:env@latest", {"docker": {"image": "python"}}, {"image": "x"}]),
        "environment_variables": st.just({"A": 1, "MASTER_PORT": 29500}),
        "inputs": st.just({"a": 1, "b": {"value": True}, "d": {"type": "uri_folder", "path": "data"}}),
        "outputs": st.just({"o": None, "m": {"type": "uri_file"}}),
        "compute": st.sampled_from(["local", {"target": "local", "instance_count": 2}, {"infrastructure": "k8s"}]),
        "resources": st.fixed_dictionaries({"instance_count": small}, optional={"shm_size": st.just("2g")}),
        "limits": st.just({"timeout": 60}),
    },
)
valid_documents = st.one_of(
    st.tuples(valid_core, st.fixed_dictionaries({}, optional={"distribution": valid_distribution})),
    st.tuples(valid_core, st.fixed_dictionaries({"distributed": valid_distributed})),
).map(lambda parts: {**parts[0], **parts[1]})


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*path, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*path, index))
    return found


@st.composite
def broken(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    """`document` with one to three slips: a value replaced, a key dropped, a key added."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(document)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = document
        for part in path[:-1]:
            parent = parent[part]
        edit = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if edit == "replace":
            parent[path[-1]] = draw(values)
        elif edit == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(values)
    return document


documents = st.one_of(valid_documents, valid_documents.flatmap(broken), random_documents)

OVERRIDE_KEYS = [
    "command",
    "code",
    "name",
    "resources.instance_count",
    "resources.locations.0",
    "resources.locations.9",
    "distribution.type",
    "distribution.process_count_per_instance",
    "distribution.process_count",
    "inputs.a",
    "inputs.a.path",
    "inputs.0",
    "outputs.o",
    "environment.image",
    "environment_variables.RANK",
    "command.x",
    "distributed.mpi.worker.count",
    "compute.instance_count",
    "$schema",
    "a..b",
    ".a",
    "",
    "0",
    "0.x",
    "tags.1x",
]
override_values = st.one_of(
    st.sampled_from(["", "3", "0", "-1", "true", "null", '"3"', "[1, 2]", "{a: 1}", "{a: [", "a: b", "#x", "- x"]),
    st.sampled_from(WORDS),
    st.text(max_size=15),
)
overrides = st.one_of(
    st.just([]),
    st.lists(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(OVERRIDE_KEYS), override_values), max_size=3),
    st.lists(st.one_of(st.text(alphabet="abc.=0 [{'\"#-$\n", max_size=15), st.text(max_size=15)), max_size=2),
)


def _dump(data: Any) -> str:
    from ruamel.yaml import YAML

    stream = io.StringIO()
    YAML(typ="safe", pure=True).dump(data, stream)
    return stream.getvalue()


MANGLE_CHARS = "\t :{}[]-'\"#&*!|>%@`,?\n\\x0"


@st.composite
def mangled(draw: st.DrawFn, text: str) -> str:
    """`text` with a few random single-character edits: the syntax errors people make."""
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        if not text:
            break
        at = draw(st.integers(min_value=0, max_value=len(text) - 1))
        edit = draw(st.sampled_from(["delete", "insert", "indent", "duplicate-line"]))
        if edit == "delete":
            text = text[:at] + text[at + 1 :]
        elif edit == "insert":
            text = text[:at] + draw(st.sampled_from(MANGLE_CHARS)) + text[at:]
        elif edit == "indent":
            start = text.rfind("\n", 0, at) + 1
            text = text[:start] + " " + text[start:]
        else:
            lines = text.splitlines(keepends=True)
            index = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            lines.insert(index, lines[index])
            text = "".join(lines)
    return text


yaml_texts = st.one_of(
    documents.map(_dump).flatmap(lambda text: st.one_of(st.just(text), mangled(text))),
    values.map(_dump).flatmap(mangled),
    st.text(alphabet="ab: -\n\t{}[]'\"#&*!|>%@,?", max_size=60),
    st.text(max_size=40),
)


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "src").mkdir()
    (folder / "data").mkdir()
    (folder / "labels.txt").write_text("x")
    return folder


def _check_outcome(run: Any, source: str, lines: bool = True) -> None:
    """The loader returned a job, or refused with a well-formed `ValidationError`.

    Problems found in a YAML file (`lines`) say the line; plain data has no lines to name.
    """
    try:
        job = run()
    except ValidationError as error:
        text = error.render()
        assert error.problems and text.startswith("invalid job: ")
        event(f"refused: {error.problems[0].key_path.split('.')[0] or error.problems[0].message[:24]}")
        for problem in error.problems:
            assert problem.message
            assert problem.position is not None
            if problem.position.source == source:
                assert not lines or (problem.position.line is not None and problem.position.line >= 1), problem
            else:
                assert problem.position.source.startswith("--set "), problem
        return
    assert isinstance(job, LoadedJob) and isinstance(job.spec, JobSpec)
    event(f"loaded: {job.spec.distribution_type}")


@FUZZ
@given(text=yaml_texts, sets=overrides)
def test_any_yaml_text_loads_or_is_refused(job_dir: Path, text: str, sets: list[str]) -> None:
    path = job_dir / "job.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _check_outcome(lambda: load_job_file(path, sets), str(path))


@FUZZ
@given(data=documents, sets=overrides)
def test_any_job_data_loads_or_is_refused(job_dir: Path, data: dict[str, Any], sets: list[str]) -> None:
    source = str(job_dir / "job.yml")
    _check_outcome(lambda: load_job_data(data, job_dir, source, sets), source, lines=False)


@FUZZ
@given(sets=overrides)
def test_any_override_on_a_valid_job_loads_or_is_refused(job_dir: Path, sets: list[str]) -> None:
    path = job_dir / "valid.yml"
    path.write_text("command: run ${{inputs.a}}\ncode: src\ninputs:\n  a: 1\nresources:\n  locations: [x]\n")
    _check_outcome(lambda: load_job_file(path, sets), str(path))


def test_alias_bombs_are_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = tmp_path / "bomb.yml"
    path.write_text("command: x\n" + "\n".join(lines) + "\n")
    with pytest.raises(ValidationError, match="aliases are expanded"):
        load_job_file(path)


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.yml"
    path.write_text("command: x\nproperties: " + "[" * 1500 + "]" * 1500 + "\n")
    with pytest.raises(ValidationError, match="nested"):
        load_job_file(path)
    path.write_text("command: x\nproperties: " + "[" * 100 + "]" * 100 + "\n")
    with pytest.raises(ValidationError, match="nested more than"):
        load_job_file(path)
