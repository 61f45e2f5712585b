"""Reading the text column of tabular corpora in batches: CSV, Parquet, ``save_to_disk`` folders.

The columnar siblings of the text and JSON readers in :mod:`tokenmask.data.corpus`, which
dispatches to them. pyarrow reads files a block / row group at a time and ``datasets``
memory-maps its folders, so memory holds one batch, not the corpus. A null value reads as ``""``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

_BATCH_ROWS = 1024
_CSV_BLOCK_BYTES = 1 << 22


def require_column(where: str | Path, column: str, columns: Sequence[str]) -> None:
    """``ValueError`` naming ``column`` and the ``columns`` there are, when it is not one of them."""
    if column not in columns:
        raise ValueError(
            f"{where}: no {column!r} column or field; there are: {', '.join(map(repr, columns)) or 'none'} "
            "(choose one with text_field / --text-field)"
        )


def is_dataset_folder(path: Path) -> bool:
    """A folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return ((path / "state.json").is_file() and (path / "dataset_info.json").is_file()) or (
        path / "dataset_dict.json"
    ).is_file()


def csv_documents(path: Path, column: str) -> Iterator[str]:
    """The ``column`` of a CSV file with a header row, one block of rows at a time.

    Quoted values may hold newlines; bytes that are not UTF-8 become U+FFFD, as in text files.

    Raises:
        ValueError: no such column, or not a readable CSV file (empty, ragged rows).
    """
    import pyarrow as pa
    from pyarrow import csv

    try:
        reader = csv.open_csv(
            path,
            read_options=csv.ReadOptions(block_size=_CSV_BLOCK_BYTES),
            parse_options=csv.ParseOptions(newlines_in_values=True),
            convert_options=csv.ConvertOptions(column_types={column: pa.binary()}),
        )
        require_column(path, column, reader.schema.names)
        for batch in reader:
            for value in batch.column(column).to_pylist():
                yield "" if value is None else value.decode("utf-8", errors="replace")
    except pa.ArrowInvalid as error:
        raise ValueError(f"{path}: not a readable CSV file ({error})") from None


def parquet_documents(path: Path, column: str) -> Iterator[str]:
    """The string ``column`` of a Parquet file, ``_BATCH_ROWS`` rows at a time.

    Raises:
        ValueError: no such column, or it does not hold strings.
    """
    import pyarrow as pa
    from pyarrow import parquet

    try:
        file = parquet.ParquetFile(path)
    except pa.ArrowInvalid as error:
        raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    schema = file.schema_arrow
    require_column(path, column, schema.names)
    _require_strings(path, column, schema.field(column).type)
    for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=[column]):
        for value in batch.column(0).to_pylist():
            yield "" if value is None else value


def dataset_documents(folder: Path, column: str, split: str | None) -> Iterator[str]:
    """The string ``column`` of a ``save_to_disk`` folder, memory-mapped, in batches.

    A ``DatasetDict`` folder gives ``split``, or all its splits in their saved order.

    Raises:
        ValueError: no such split (naming the splits there are) or column, or not strings.
    """
    import datasets

    loaded = datasets.load_from_disk(str(folder))
    if isinstance(loaded, datasets.DatasetDict):
        if split is not None and split not in loaded:
            raise ValueError(f"{folder}: no split {split!r}; there are: {', '.join(map(repr, loaded))}")
        parts = [(f"{folder} [{name}]", loaded[name]) for name in loaded if split in (None, name)]
    else:
        parts = [(str(folder), loaded)]
    for where, dataset in parts:
        require_column(where, column, dataset.column_names)
        _require_strings(where, column, dataset.data.schema.field(column).type)
        for table in dataset.select_columns([column]).with_format("arrow").iter(batch_size=_BATCH_ROWS):
            for value in table.column(0).to_pylist():
                yield "" if value is None else value


def _require_strings(where: str | Path, column: str, kind: object) -> None:
    import pyarrow as pa

    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"{where}: the {column!r} column holds {kind}, not strings")
