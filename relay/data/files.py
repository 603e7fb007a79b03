"""Reading user datasets from local files: JSONL, Parquet and ``Dataset.save_to_disk`` directories.

Every record comes back with a ``where`` string that locates it in error messages: ``data/x.jsonl:12``
(1-based line) for JSONL, ``data/x.parquet row 12`` (1-based row) for Parquet and for arrow directories.
Config fields (``data.fields.<role>=<column>``) map Relay's roles to a record's columns::

    records = read_records("data/x.jsonl")  # [("data/x.jsonl:1", {"question": "2+2?", "solution": "4"}), ...]
    where, record = records[0]
    fields = {"prompt": "question", "answer": "solution", "uid": None}
    pick_fields(record, where, fields, required=["prompt", "answer"])  # {"prompt": "2+2?", "answer": "4"}

Parquet and arrow directories are read with ``pyarrow`` alone (imported only when such a file is read);
the ``datasets`` package is not needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from relay.data.gsm8k import DatasetError

JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
_ACCEPTED = (
    "a JSON Lines file (.jsonl or .json, one JSON object per line), a Parquet file (.parquet), "
    "or a directory written by datasets' Dataset.save_to_disk (state.json plus .arrow files)"
)
_JSONL_HINT = "each non-blank line must be one JSON object"


def dataset_format(path: Path) -> str:
    """``"jsonl"``, ``"parquet"`` or ``"arrow"`` (a ``save_to_disk`` directory) for ``path``.

    Example: ``dataset_format(Path("data/train.jsonl")) == "jsonl"``; for a ``DatasetDict`` directory
    (``dataset_dict.json`` with splits ``train`` and ``test``) it raises DatasetError naming the splits and
    the split directory to use instead (``data/mydir/train``). Raises FileNotFoundError for a missing path
    and DatasetError for anything that is none of the accepted formats.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: dataset not found (check the path is relative to the repo root)")
    if path.is_dir():
        if (path / "dataset_dict.json").is_file() and not (path / "state.json").is_file():
            splits = _dataset_dict_splits(path)
            example = "train" if "train" in splits else (splits[0] if splits else "<split>")
            raise DatasetError(
                f"{path}: a DatasetDict with splits {splits}; set data.train_path to one of them, e.g. {path / example}"
            )
        if (path / "state.json").is_file():
            _arrow_data_files(path)  # validates state.json and the files it lists
            return "arrow"
        raise DatasetError(f"{path}: directory has no state.json or dataset_dict.json; expected {_ACCEPTED}")
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    raise DatasetError(f"{path}: unknown dataset format {suffix or '(no extension)'!r}; expected {_ACCEPTED}")


def read_records(path: str | Path) -> list[tuple[str, dict]]:
    """Every record of the dataset at ``path`` as ``(where, record)``, in file order.

    Example: a JSONL file whose line 2 is blank gives ``[("d.jsonl:1", {...}), ("d.jsonl:3", {...})]``; the
    same rows as Parquet give ``[("d.parquet row 1", {...}), ("d.parquet row 2", {...})]``. Nested Parquet
    and arrow structs come back as dicts. Raises DatasetError (naming ``path:line``) for a JSONL line that
    is not a JSON object, for an unreadable Parquet or arrow file, and for a dataset with no records.
    """
    path = Path(path)
    fmt = dataset_format(path)
    if fmt == "jsonl":
        records = _read_jsonl(path)
    else:
        rows = _read_parquet(path) if fmt == "parquet" else _read_arrow_dir(path)
        records = [(f"{path} row {i}", row) for i, row in enumerate(rows, start=1)]
    if not records:
        raise DatasetError(f"{path}: dataset has no records (the file or its data files hold no rows)")
    return records


def pick_fields(record: dict, where: str, fields: Mapping[str, str | None], required: Sequence[str]) -> dict[str, Any]:
    """``{role: value}`` for each role in ``fields`` mapped to a column that ``record`` has.

    ``fields`` maps a role to a column name, or to a dotted path into nested objects (``"meta.answer"``
    reads ``record["meta"]["answer"]``; a column literally named ``"meta.answer"`` wins), or to None for
    an unmapped role. Values pass through unchanged (ints stay ints). An optional role whose column is
    missing or None is left out. A required role that is unmapped, missing, None or an empty string
    raises DatasetError, e.g.::

        data/x.jsonl:3: no field 'problem' (data.fields.prompt=problem); this row has
        ['question', 'solution']; set data.fields.prompt to one of them
    """
    picked: dict[str, Any] = {}
    for role in dict.fromkeys([*fields, *required]):
        column = fields.get(role)
        is_required = role in required
        if column is None:
            if is_required:
                raise DatasetError(
                    f"{where}: required role '{role}' is not mapped (data.fields.{role} is unset); "
                    f"this row has {_columns(record)}; set data.fields.{role} to one of them"
                )
            continue
        found, value = _lookup(record, column)
        if found and value is not None:
            if is_required and isinstance(value, str) and not value.strip():
                raise DatasetError(
                    f"{where}: field '{column}' (data.fields.{role}={column}) is an empty string; "
                    f"fill it in or set data.fields.{role} to another of {_columns(record)}"
                )
            picked[role] = value
        elif is_required:
            problem = f"field '{column}' is null" if found else f"no field '{column}'"
            raise DatasetError(
                f"{where}: {problem} (data.fields.{role}={column}); this row has {_columns(record)}; "
                f"set data.fields.{role} to one of them"
            )
    return picked


# --- readers ------------------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[tuple[str, dict]]:
    records = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{where}: invalid JSON ({e.msg} at column {e.colno}); {_JSONL_HINT}") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}; {_JSONL_HINT}")
            records.append((where, record))
    return records


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise DatasetError(f"reading {what} needs pyarrow (pip install pyarrow), or convert it to JSONL") from None
    return pyarrow


def _read_parquet(path: Path) -> list[dict]:
    _pyarrow(f"{path} (Parquet)")
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError subclasses for corrupt files
        raise DatasetError(f"{path}: cannot read Parquet ({type(e).__name__}: {e})") from None


def _read_arrow_dir(path: Path) -> list[dict]:
    """Rows of a ``save_to_disk`` directory: each data file is an Arrow IPC *stream*, in state.json order."""
    pa = _pyarrow(f"{path} (a save_to_disk directory)")
    rows: list[dict] = []
    for data_file in _arrow_data_files(path):
        try:
            with pa.memory_map(str(data_file)) as source:
                rows.extend(pa.ipc.open_stream(source).read_all().to_pylist())
        except Exception as e:  # ArrowInvalid for a file that is not an IPC stream
            raise DatasetError(f"{data_file}: cannot read Arrow IPC stream ({type(e).__name__}: {e})") from None
    return rows


def _arrow_data_files(path: Path) -> list[Path]:
    state_path = path / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        names = [entry["filename"] for entry in state["_data_files"]]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DatasetError(
            f"{state_path}: not a save_to_disk state.json ({type(e).__name__}: {e}); "
            "expected '_data_files': [{'filename': '....arrow'}, ...]"
        ) from None
    if not names:
        raise DatasetError(f"{state_path}: '_data_files' is empty; the dataset has no data files")
    files = [path / name for name in names]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DatasetError(f"{state_path}: lists data files that do not exist: {missing}")
    return files


def _dataset_dict_splits(path: Path) -> list[str]:
    try:
        splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
    except (json.JSONDecodeError, KeyError, TypeError):
        splits = [p.name for p in path.iterdir() if (p / "state.json").is_file()]
    return sorted(str(s) for s in splits)


# --- field lookup -------------------------------------------------------------------------------------


def _lookup(record: dict, column: str) -> tuple[bool, Any]:
    """``(found, value)`` for a column name or a dotted path into nested dicts."""
    if column in record:
        return True, record[column]
    value: Any = record
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _columns(record: dict, prefix: str = "") -> list[str]:
    """The record's column names, nested dicts spelled as dotted paths (``meta.answer``)."""
    names: list[str] = []
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            names.extend(_columns(value, f"{name}."))
        else:
            names.append(name)
    return names
