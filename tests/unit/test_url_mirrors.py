"""config.yaml's `url_mirrors`: a URL prefix -> a local folder or datastore, longest prefix first;
bad entries named by file, line and key; `distrun plan` says where each input comes from."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError, ValidationError
from distrun.data.locations import input_location
from distrun.data.mirrors import add_mirror, mirrored, read_mirrors
from distrun.data.register import register_path
from distrun.loading.loader import load_job_file
from distrun.plan.text import plan_as_text
from distrun.runner.jobs import plan_job
from distrun.store.layout import Layout

BLOB = "https://azuremlexamples.blob.core.windows.net/datasets/"
WASBS = "wasbs://datasets@azuremlexamples.blob.core.windows.net/"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DISTRUN_HOME", str(home))
    return home


def config(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def copy_of(tmp_path: Path, *files: str) -> Path:
    root = tmp_path / "copy"
    root.mkdir(exist_ok=True)
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    return root


def test_the_longest_prefix_wins_and_the_rest_of_the_url_is_the_path(home: Path, tmp_path: Path) -> None:
    broad, narrow = tmp_path / "broad", copy_of(tmp_path, "iris/iris.csv")
    broad.mkdir()
    config(
        home,
        f"""
        url_mirrors:
          https://azuremlexamples.blob.core.windows.net/: {broad}
          {BLOB}: {narrow}
        """,
    )
    found = mirrored(BLOB + "iris/iris.csv?sv=2021&sig=secret", home)  # a SAS token is no part of the path
    assert found is not None and found.path == narrow / "iris" / "iris.csv" and found.mirror.prefix == BLOB
    other = mirrored("https://azuremlexamples.blob.core.windows.net/models/m.pt", home)
    assert other is not None and other.path == broad / "models" / "m.pt"
    assert mirrored("https://elsewhere.example.org/datasets/iris.csv", home) is None


def test_a_prefix_ends_at_a_path_boundary_and_its_scheme_and_host_ignore_case(home: Path, tmp_path: Path) -> None:
    root = copy_of(tmp_path, "a.csv")
    config(home, f"url_mirrors: {{'https://host.example.org/data': {root}}}\n")
    assert mirrored("https://host.example.org/data2/a.csv", home) is None  # not under /data
    found = mirrored("HTTPS://Host.Example.org/data/a.csv", home)
    assert found is not None and found.path == root / "a.csv"
    with pytest.raises(DistrunError, match=r"leaves its mirror .* with '\.\.'"):
        mirrored("https://host.example.org/data/../../etc/passwd", home)


def test_an_input_under_a_mirror_is_its_local_copy_for_every_scheme(home: Path, tmp_path: Path) -> None:
    root = copy_of(tmp_path, "iris/iris.csv")
    config(home, f"url_mirrors:\n  {BLOB}: {root}\n  {WASBS}: {root}\n")
    for url in (BLOB + "iris/iris.csv", WASBS + "iris/iris.csv"):
        location = input_location(url, tmp_path, home)
        assert (location.path, location.url) == (root / "iris" / "iris.csv", None)  # nothing to fetch
        assert location.source().startswith("local copy by url_mirrors at ")
    unmirrored = input_location("https://other.example.org/x.csv", tmp_path, home)
    assert unmirrored.url == "https://other.example.org/x.csv" and "downloaded" in unmirrored.source()


def test_a_datastore_uri_as_the_mirror(home: Path, tmp_path: Path) -> None:
    store = copy_of(tmp_path, "examples/iris/iris.csv")
    config(
        home,
        f"""
        datastores: {{shared: {store}}}
        url_mirrors: {{{BLOB}: azureml://datastores/shared/paths/examples}}
        """,
    )
    found = mirrored(BLOB + "iris/iris.csv", home)
    assert found is not None and found.path == store / "examples" / "iris" / "iris.csv"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("url_mirrors: [a, b]", r"config.yaml:1:1: url_mirrors: expected a mapping"),
        ("url_mirrors: {datasets/: /tmp}", r"config.yaml:1:15: url_mirrors.datasets/: expected a URL prefix"),
        ("url_mirrors: {ftp://host/: /tmp}", r"url_mirrors.ftp://host/: expected a URL prefix"),
        (f"url_mirrors: {{{BLOB}: copy}}", rf"config.yaml:1:15: url_mirrors.{BLOB}: the folder 'copy' is relative"),
        (f"url_mirrors: {{{BLOB}: [a]}}", rf"url_mirrors.{BLOB}: expected a folder \(an absolute path\)"),
        (f"url_mirrors: {{{BLOB}: /nonexistent/copy}}", rf"url_mirrors.{BLOB}: the folder /nonexistent/copy does not"),
        (f"url_mirrors: {{{BLOB}: azureml://jobs/x}}", rf"url_mirrors.{BLOB}: 'azureml://jobs/x' is not a datastore"),
    ],
)
def test_a_bad_entry_names_config_yaml_and_its_key(home: Path, section: str, message: str) -> None:
    config(home, section + "\n")
    with pytest.raises(DistrunError, match=message) as caught:
        mirrored(BLOB + "iris.csv", home)
    assert str(home / "config.yaml") in caught.value.message and caught.value.hint


def test_a_missing_file_under_a_mirror_is_a_validation_problem_naming_the_entry(home: Path, tmp_path: Path) -> None:
    root = copy_of(tmp_path)
    config(home, f"url_mirrors: {{{BLOB}: {root}}}\n")
    job = tmp_path / "job.yml"
    job.write_text(f"command: cat ${{{{inputs.iris}}}}\ninputs:\n  iris: {{type: uri_file, path: '{BLOB}iris.csv'}}\n")
    with pytest.raises(ValidationError) as caught:
        load_job_file(str(job), ())
    [problem] = caught.value.problems
    assert problem.key_path == "inputs.iris.path"
    assert f"{root / 'iris.csv'} does not exist (the local copy of {BLOB}iris.csv by the url_mirrors entry" in (
        problem.message
    )


def test_plan_shows_where_each_input_comes_from(home: Path, tmp_path: Path) -> None:
    root = copy_of(tmp_path, "iris/iris.csv")
    (tmp_path / "local.txt").write_text("x")
    config(home, f"url_mirrors: {{{BLOB}: {root}}}\n")
    job = tmp_path / "job.yml"
    job.write_text(
        textwrap.dedent(
            f"""
            command: cat ${{{{inputs.iris}}}} ${{{{inputs.other}}}} ${{{{inputs.mine}}}}
            inputs:
              iris: {{type: uri_file, path: "{BLOB}iris/iris.csv"}}
              other: {{type: uri_file, path: "https://other.example.org/x.csv"}}
              mine: {{type: uri_file, path: ./local.txt}}
            """
        )
    )
    shown = plan_job(load_job_file(str(job), ()), Layout(home)).show()
    inputs = shown["inputs"]
    assert inputs["iris"]["local"] == str(root / "iris" / "iris.csv")
    assert inputs["iris"]["path"] == f"{BLOB}iris/iris.csv"
    assert inputs["iris"]["source"].startswith(f"local copy by url_mirrors at {home / 'config.yaml'}:1:")
    assert inputs["other"]["source"] == "downloaded into the cache when the job starts"
    assert inputs["mine"] == {"path": "./local.txt", "local": str(tmp_path / "local.txt"), "source": "local path"}
    assert str(root / "iris" / "iris.csv") in shown["plan"]["command"]
    text = plan_as_text(shown)
    assert f"input iris: {BLOB}iris/iris.csv -> {root / 'iris' / 'iris.csv'}  (local copy by url_mirrors at " in text
    assert not (home / "cache").exists()  # nothing was fetched


def test_a_data_asset_of_a_mirrored_url_keeps_the_url(home: Path, tmp_path: Path) -> None:
    root = copy_of(tmp_path, "iris.csv")
    config(home, f"url_mirrors: {{{BLOB}: {root}}}\n")
    asset = register_path(home, "iris", "", BLOB + "iris.csv", "uri_file", None, tmp_path)
    assert asset.path == BLOB + "iris.csv"  # the mirror is looked up again when a job uses it
    location = input_location("azureml:iris:1", tmp_path, home)
    assert location.path == root / "iris.csv" and location.mirror is not None


def test_add_mirror_writes_config_yaml_and_keeps_the_rest(home: Path, tmp_path: Path, monkeypatch) -> None:
    path = config(home, "# my targets\ncompute:\n  hpc: {type: slurm, partition: debug}\n")
    root = copy_of(tmp_path)
    add_mirror(path, BLOB, "copy", tmp_path)  # relative to the working folder, stored absolute
    [mirror] = read_mirrors(path)
    assert (mirror.prefix, mirror.target) == (BLOB, str(root))
    assert "# my targets" in path.read_text() and "partition: debug" in path.read_text()
    with pytest.raises(DistrunError, match="does not exist"):
        add_mirror(path, WASBS, str(tmp_path / "absent"), tmp_path)
    with pytest.raises(DistrunError, match="expected a URL prefix"):
        add_mirror(path, "datasets/", str(root), tmp_path)
    assert len(read_mirrors(path)) == 1
