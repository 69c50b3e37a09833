"""distrun's one MLTable reader: the forms of Azure ML's examples (a CSV with its read options and
column types, a parquet file, a pattern with dropped columns, JSON lines, a folder), and every
bad MLTable refused before its data is read, naming the file, line, key path and a hint."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distrun.data.mltable import (
    MLTableError,
    ReadDelimited,
    ReadParquet,
    RowStep,
    TablePath,
    load_mltable,
    read_dataframe,
    table_files,
)


def table(folder: Path, mltable: str, files: dict[str, str | bytes] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MLTable").write_text(textwrap.dedent(mltable))
    for name, content in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content)
    return folder


# The bank-marketing table of the AutoML classification example, small.
BANK = """\
    paths:
      - file: ./bank_marketing_train_data.csv
    transformations:
      - read_delimited:
            delimiter: ','
            encoding: 'ascii'
            empty_as_string: false
    """


def test_a_delimited_table_reads_as_its_options_say(tmp_path: Path) -> None:
    rows = "age,job,y\n30,admin.,no\n41,,yes\n"
    folder = table(tmp_path / "bank", BANK, {"bank_marketing_train_data.csv": rows})
    spec = load_mltable(folder)
    assert spec.paths == (TablePath("file", "bank_marketing_train_data.csv"),)
    assert spec.reader == ReadDelimited(delimiter=",", encoding="ascii", empty_as_string=False)
    assert table_files(spec) == [folder / "bank_marketing_train_data.csv"]
    frame = read_dataframe(folder)
    assert list(frame.columns) == ["age", "job", "y"]
    assert frame["age"].tolist() == [30, 41]
    assert frame["job"].isna().tolist() == [False, True]  # an empty field is null unless empty_as_string


def test_column_types_take_and_a_path_column(tmp_path: Path) -> None:
    folder = table(
        tmp_path / "machines",
        """\
        paths:
          - file: ./a.csv
          - file: ./b.csv
        transformations:
          - read_delimited:
              delimiter: ';'
              header: from_first_file
              empty_as_string: true
              include_path_column: true
          - convert_column_types:
              - columns: [MYCT, CACH]
                column_type: float
              - columns: Vendor
                column_type: string
          - take: 3
        """,
        {"a.csv": "Vendor;MYCT;CACH\nacme;1;2\n;3;4\n", "b.csv": "zeta;5;6\nomega;7;8\n"},
    )
    frame = read_dataframe(load_mltable(folder))
    assert frame["MYCT"].tolist() == [1.0, 3.0, 5.0]
    assert frame["Vendor"].tolist() == ["acme", "", "zeta"]  # empty_as_string keeps ""
    assert frame["Path"].tolist() == [str(folder / "a.csv")] * 2 + [str(folder / "b.csv")]


def test_a_pattern_with_dropped_columns_and_no_header(tmp_path: Path) -> None:
    # The titanic sample-mltable of the SDK's data assets, small.
    folder = table(
        tmp_path / "titanic",
        """\
        $schema: https://azuremlschemas.azureedge.net/latest/MLTable.schema.json
        paths:
            - pattern: ./*validated.csv
        transformations:
          - read_delimited:
              delimiter: ","
              header: no_header
              encoding: utf8
          - drop_columns: ["Column2"]
        """,
        {"b_validated.csv": "3,x,9\n", "a_validated.csv": "1,y,7\n", "other.csv": "0,0,0\n"},
    )
    spec = load_mltable(folder)
    assert [p.name for p in table_files(spec)] == ["a_validated.csv", "b_validated.csv"]
    frame = read_dataframe(spec)
    assert list(frame.columns) == ["Column1", "Column3"]
    assert frame.values.tolist() == [[1, 7], [3, 9]]


def test_parquet_and_a_folder(tmp_path: Path) -> None:
    import pandas as pd

    folder = tmp_path / "diabetes"
    (folder / "parts").mkdir(parents=True)
    pd.DataFrame({"x": [1, 2]}).to_parquet(folder / "parts" / "one.parquet")
    pd.DataFrame({"x": [3]}).to_parquet(folder / "parts" / "two.parquet")
    table(folder, "paths:\n  - folder: ./parts\ntransformations:\n  - read_parquet\n  - skip: 1\n")
    spec = load_mltable(folder)
    assert spec.reader == ReadParquet() and spec.steps == (RowStep("skip", 1),)
    assert read_dataframe(folder)["x"].tolist() == [2, 3]


def test_json_lines_and_a_table_of_files(tmp_path: Path) -> None:
    lines = '{"a": 1, "b": "x"}\nnot json\n{"a": 2, "b": "y"}\n'
    folder = table(
        tmp_path / "json",
        "paths:\n  - file: d.jsonl\ntransformations:\n  - read_json_lines:\n      invalid_lines: drop\n"
        "  - keep_columns: a\n",
        {"d.jsonl": lines},
    )
    assert read_dataframe(folder).to_dict("list") == {"a": [1, 2]}
    strict = table(tmp_path / "strict", "paths:\n  - file: d.jsonl\ntransformations:\n  - read_json_lines\n")
    (strict / "d.jsonl").write_text(lines)
    with pytest.raises(MLTableError, match="line 2 is not JSON"):
        read_dataframe(strict)
    listing = table(tmp_path / "files", "paths:\n  - folder: .\n", {"1.png": "a", "sub/2.png": "b"})
    assert read_dataframe(listing)["Path"].tolist() == [str(listing / "1.png"), str(listing / "sub" / "2.png")]


@pytest.mark.parametrize(
    ("mltable", "line", "key_path", "words"),
    [
        ("paths:\n  - file: a.csv\nrows: 3\n", 3, "rows", "unknown key 'rows'"),
        ("type: uri_folder\npaths:\n  - file: a.csv\n", 1, "type", "is not mltable"),
        ("paths: []\n", 1, "paths", "at least one entry"),
        ("paths:\n  - files: a.csv\n", 2, "paths[0].files", "unknown path kind"),
        ("paths:\n  - file: azureml://datastores/x/paths/a.csv\n", 2, "paths[0].file", "remote path"),
        (
            "paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      header: first\n",
            5,
            "transformations[0].read_delimited.header",
            "'first' is not allowed",
        ),
        (
            "paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      delimiter: ',,'\n",
            5,
            "transformations[0].read_delimited.delimiter",
            "not one character",
        ),
        ("paths:\n  - file: a.csv\ntransformations:\n  - take: -1\n", 4, "transformations[0].take", "count of rows"),
        (
            "paths:\n  - file: a.csv\ntransformations:\n  - filter: 'col(\"a\") > 1'\n",
            4,
            "transformations[0]",
            "'filter' is not read by distrun",
        ),
        (
            "paths:\n  - file: a.csv\ntransformations:\n  - take: 1\n  - read_parquet\n",
            5,
            "transformations[1].read_parquet",
            "first and only read",
        ),
        (
            "paths:\n  - file: a.csv\ntransformations:\n  - convert_column_types:\n      - columns: a\n"
            "        column_type: decimal\n",
            6,
            "transformations[0].convert_column_types[0].column_type",
            "'decimal' is not allowed",
        ),
        ("paths:\n  - file: a.csv\n bad: [\n", 3, "", "YAML syntax error"),
    ],
)
def test_a_bad_mltable_names_file_line_and_key(
    tmp_path: Path, mltable: str, line: int, key_path: str, words: str
) -> None:
    folder = table(tmp_path / "t", mltable, {"a.csv": "a\n1\n"})
    with pytest.raises(MLTableError) as caught:
        load_mltable(folder)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.file, error.line, error.key_path) == (str(folder / "MLTable"), line, key_path)
    assert words in str(error) and f"{folder / 'MLTable'}:{line}:" in str(error)
    assert error.hint


def test_missing_files_columns_and_values_are_named(tmp_path: Path) -> None:
    with pytest.raises(MLTableError, match="has no MLTable file"):
        load_mltable(tmp_path)
    with pytest.raises(MLTableError, match="MLTable folder does not exist"):
        load_mltable(tmp_path / "nowhere")
    gone = table(tmp_path / "gone", "paths:\n  - pattern: ./*.csv\n")
    with pytest.raises(MLTableError, match=r"paths\[0\].pattern: pattern '\*.csv' names no file"):
        table_files(load_mltable(gone))
    columns = table(
        tmp_path / "cols",
        "paths:\n  - file: a.csv\ntransformations:\n  - read_delimited: {}\n  - drop_columns: [b]\n",
        {"a.csv": "a\n1\n"},
    )
    with pytest.raises(MLTableError, match="no column 'b'") as caught:
        read_dataframe(columns)
    assert "the table's columns are a" in caught.value.hint
    typed = table(
        tmp_path / "typed",
        "paths:\n  - file: a.csv\ntransformations:\n  - read_delimited: {}\n  - convert_column_types:\n"
        "      - columns: a\n        column_type: int\n",
        {"a.csv": "a\nseven\n"},
    )
    with pytest.raises(MLTableError, match="column 'a' cannot be read as int"):
        read_dataframe(typed)
