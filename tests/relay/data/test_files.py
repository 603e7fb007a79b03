"""Tests for relay.data.files: JSONL, Parquet and save_to_disk readers, field mapping and fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay.data.files import dataset_format, pick_fields, read_records
from relay.data.gsm8k import DatasetError
from relay.run.manifest import dataset_fingerprint

ROWS = [
    {"question": "What is 2+2?", "answer": "4", "level": 1, "meta": {"source": "gsm8k", "answer": "4"}},
    {"question": "What is 3*5?", "answer": "15", "level": 2, "meta": {"source": "math", "answer": "15"}},
    {"question": "What is 9-1?", "answer": "8", "level": 3, "meta": {"source": "gsm8k", "answer": "8"}},
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _parquet(path: Path, rows: list[dict]) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _arrow_dir(path: Path, rows: list[dict]) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


def test_formats_read_the_same_records(tmp_path: Path) -> None:
    jsonl = _jsonl(tmp_path / "d.jsonl", ROWS)
    parquet = _parquet(tmp_path / "d.parquet", ROWS)
    arrow = _arrow_dir(tmp_path / "d_arrow", ROWS)
    assert [dataset_format(p) for p in (jsonl, parquet, arrow)] == ["jsonl", "parquet", "arrow"]
    by_format = {p: read_records(p) for p in (jsonl, parquet, arrow)}
    assert [w for w, _ in by_format[jsonl]] == [f"{jsonl}:{i}" for i in (1, 2, 3)]
    assert [w for w, _ in by_format[parquet]] == [f"{parquet} row {i}" for i in (1, 2, 3)]
    assert [w for w, _ in by_format[arrow]] == [f"{arrow} row {i}" for i in (1, 2, 3)]
    for records in by_format.values():
        assert [r for _, r in records] == ROWS


def test_arrow_dir_with_several_shards_keeps_order(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(6)]
    path = tmp_path / "sharded"
    datasets.Dataset.from_list(rows).save_to_disk(str(path), num_shards=3)
    assert len(json.loads((path / "state.json").read_text())["_data_files"]) == 3
    records = read_records(path)
    assert [r for _, r in records] == rows
    assert records[-1][0] == f"{path} row 6"


def test_dataset_dict_dir_names_the_splits(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_list(ROWS)
    path = tmp_path / "mydir"
    datasets.DatasetDict(train=ds, test=ds).save_to_disk(str(path))
    with pytest.raises(DatasetError) as err:
        read_records(path)
    assert str(err.value) == (
        f"{path}: a DatasetDict with splits ['test', 'train']; set data.train_path to one of them, e.g. {path}/train"
    )
    assert [r for _, r in read_records(path / "train")] == ROWS


def test_missing_path_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        dataset_format(tmp_path / "nope.jsonl")
    csv = tmp_path / "d.csv"
    csv.write_text("question,answer\n")
    with pytest.raises(DatasetError, match=r"d\.csv: unknown dataset format '\.csv'; expected .*Parquet"):
        read_records(csv)
    (tmp_path / "plain").mkdir()
    with pytest.raises(DatasetError, match="plain: directory has no state.json"):
        dataset_format(tmp_path / "plain")


def test_jsonl_blank_lines_skipped_and_bad_lines_located(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n   \n" + json.dumps(ROWS[1]) + "\n")
    assert [w for w, _ in read_records(path)] == [f"{path}:1", f"{path}:4"]
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(DatasetError, match=rf"^{path}:2: invalid JSON \(.*column 2\); each non-blank line"):
        read_records(path)
    path.write_text(json.dumps(ROWS) + "\n")
    with pytest.raises(DatasetError, match=rf"^{path}:1: expected a JSON object, got list"):
        read_records(path)


def test_empty_dataset(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n\n")
    with pytest.raises(DatasetError, match="d.jsonl: dataset has no records"):
        read_records(path)
    pa = pytest.importorskip("pyarrow")
    parquet = tmp_path / "d.parquet"
    pytest.importorskip("pyarrow.parquet").write_table(pa.table({"question": pa.array([], pa.string())}), parquet)
    with pytest.raises(DatasetError, match="d.parquet: dataset has no records"):
        read_records(parquet)


def test_corrupt_parquet(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "d.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match="d.parquet: cannot read Parquet"):
        read_records(path)


def test_pick_fields_maps_roles_and_passes_values_through() -> None:
    fields = {"prompt": "question", "answer": "meta.answer", "data_source": "meta.source", "uid": None, "x": "no"}
    picked = pick_fields(ROWS[1], "d.jsonl:2", fields, required=["prompt", "answer"])
    assert picked == {"prompt": "What is 3*5?", "answer": "15", "data_source": "math"}
    assert pick_fields(ROWS[0], "w", {"prompt": "question", "answer": "level"}, ["answer"])["answer"] == 1
    assert pick_fields({"meta.answer": "flat", "meta": {"answer": "nested"}}, "w", {"a": "meta.answer"}, ["a"]) == {
        "a": "flat"
    }


def test_pick_fields_missing_field_names_file_row_field_and_fix(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "x.jsonl", [{"question": "q", "solution": "s"}] * 3)
    where, record = read_records(path)[2]
    with pytest.raises(DatasetError) as err:
        pick_fields(record, where, {"prompt": "problem", "answer": "solution"}, ["prompt", "answer"])
    assert str(err.value) == (
        f"{path}:3: no field 'problem' (data.fields.prompt=problem); this row has ['question', 'solution']; "
        "set data.fields.prompt to one of them"
    )


@pytest.mark.parametrize(
    ("record", "fields", "message"),
    [
        (
            {"q": "x"},
            {"prompt": None},
            "w row 2: required role 'prompt' is not mapped (data.fields.prompt is unset); this row has ['q']",
        ),
        ({"q": "x"}, {}, "required role 'prompt' is not mapped"),
        ({"q": None}, {"prompt": "q"}, "w row 2: field 'q' is null (data.fields.prompt=q); this row has ['q']"),
        ({"q": "  "}, {"prompt": "q"}, "w row 2: field 'q' (data.fields.prompt=q) is an empty string"),
        (
            {"q": "x", "meta": {"a": 1, "b": {"c": 2}}},
            {"prompt": "meta.z"},
            "no field 'meta.z' (data.fields.prompt=meta.z); this row has ['q', 'meta.a', 'meta.b.c']",
        ),
    ],
)
def test_pick_fields_required_errors(record: dict, fields: dict, message: str) -> None:
    with pytest.raises(DatasetError) as err:
        pick_fields(record, "w row 2", fields, required=["prompt"])
    assert message in str(err.value)


def test_pick_fields_optional_roles_may_be_absent_or_null() -> None:
    record = {"q": "x", "id": None}
    assert pick_fields(record, "w", {"prompt": "q", "uid": "id", "data_source": "src"}, ["prompt"]) == {"prompt": "x"}
    assert pick_fields({"q": ""}, "w", {"prompt": "q"}, []) == {"prompt": ""}


def test_fingerprint_of_a_file(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", ROWS)
    first = dataset_fingerprint(path)
    assert set(first) == {"path", "size", "sha256"}
    assert first == dataset_fingerprint(path)
    _jsonl(path, [ROWS[0], ROWS[1], {**ROWS[2], "answer": "9"}])
    assert dataset_fingerprint(path)["sha256"] != first["sha256"]


def test_fingerprint_of_an_arrow_dir(tmp_path: Path) -> None:
    path = _arrow_dir(tmp_path / "d_arrow", ROWS)
    first = dataset_fingerprint(path)
    assert first["format"] == "arrow"
    assert {"path", "sha256", "total_bytes", "files"} <= set(first)
    assert "data-00000-of-00001.arrow" in [f["path"] for f in first["files"]]
    assert first == dataset_fingerprint(path)
    _arrow_dir(path, [ROWS[0], ROWS[1], {**ROWS[2], "answer": "9"}])  # rewritten in place
    assert dataset_fingerprint(path)["sha256"] != first["sha256"]
