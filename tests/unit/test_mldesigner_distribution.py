"""distrun's `mldesigner` (the distribution distrun-mldesigner) beside Microsoft's: a pipeline
function that calls a component of Microsoft's package is refused by name before its body runs,
a name only Microsoft's package has says so when imported from distrun's, and a Python that
holds both distributions is told so when `mldesigner` is imported.

Microsoft's package cannot be installed here beside distrun's (they are the same package), so
its component is emulated: a function carrying the mark Microsoft's `@command_component` puts on
what it decorates (`_is_mldesigner_component = True`), and its installation is its metadata
folder (`mldesigner-0.1.0b23.dist-info`), which is what `importlib.metadata` reads."""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError
from distrun.dsl import pipeline
from distrun.sdk.foreign_components import microsoft_components


def microsofts_train(**values: object) -> None:  # emulated: Microsoft's @command_component function
    raise AssertionError("a pipeline's body ran a component of Microsoft's mldesigner")


microsofts_train._is_mldesigner_component = True  # type: ignore[attr-defined]

microsofts_module = types.ModuleType("microsofts_components")  # `import components` of such functions
microsofts_module.score = microsofts_train  # type: ignore[attr-defined]


def test_a_pipeline_calling_microsofts_component_is_refused_before_its_body_runs() -> None:
    @pipeline(default_compute="local")
    def train_and_score(data: str = "x") -> None:
        microsofts_train(data=data)
        microsofts_module.score(data=data)

    with pytest.raises(DistrunError) as caught:
        train_and_score()
    assert str(caught.value).startswith(
        "@pipeline train_and_score: microsofts_module.score, microsofts_train are components of Microsoft's "
        "mldesigner (installed in this Python), which distrun does not run"
    )
    assert "distrun-mldesigner" in caught.value.hint


def test_distruns_own_components_and_other_names_are_not_microsofts(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from mldesigner import command_component\n\n@command_component\ndef train(epochs: int): pass\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        mine = importlib.import_module("mine")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mine", None)
    only_microsofts = microsofts_train
    unused = None

    class Settings:  # attribute lookup that fails with a KeyError, as a mapping with attribute access may
        def __getattr__(self, name: str) -> object:
            raise KeyError(name)

    settings = Settings()

    def body() -> None:
        mine.train(epochs=unused or settings.epochs)
        only_microsofts()
        print(len([]))

    assert microsoft_components(body) == ["only_microsofts"]


def test_a_name_only_microsofts_package_has_says_so() -> None:
    import mldesigner

    with pytest.raises(ImportError, match=r"mldesigner\.get_io_context is Microsoft's mldesigner's"):
        from mldesigner import get_io_context  # noqa: F401
    with pytest.raises(AttributeError):
        mldesigner.nothing_of_either  # noqa: B018


def test_both_distributions_in_one_python_are_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mldesigner

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(mldesigner)  # Microsoft's is not installed: nothing said
    info = tmp_path / "mldesigner-0.1.0b23.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mldesigner\nVersion: 0.1.0b23\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.warns(UserWarning, match="Microsoft's mldesigner and distrun-mldesigner are both installed"):
            importlib.reload(mldesigner)
    finally:
        monkeypatch.undo()
        importlib.reload(mldesigner)
