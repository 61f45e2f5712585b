"""Reading tabular data in batches: CSV / TSV, Parquet, ``save_to_disk`` folders.

The columnar siblings of the text and JSON readers in :mod:`tokenmask.text.corpus`, which
dispatches to them. pyarrow reads files a block / row group at a time and ``datasets``
memory-maps its folders, so memory holds one batch, not the corpus. ``*_records`` give the
chosen columns of each row as a dict (a null is ``None``); ``*_documents`` give one string
column, where a null reads as ``""``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenmask.text.byte_checks import TextChecks

_BATCH_ROWS = 1024
_CSV_BLOCK_BYTES = 1 << 22
TEXT_FIELD_HINT = "(choose one with text_field / --text-field)"

Record = dict[str, Any]


def require_column(where: str | Path, column: str, columns: Sequence[str], *, hint: str = TEXT_FIELD_HINT) -> None:
    """``ValueError`` naming ``column`` and the ``columns`` there are, when it is not one of them."""
    if column not in columns:
        raise ValueError(
            f"{where}: no {column!r} column or field; there are: {', '.join(map(repr, columns)) or 'none'}"
            + (f" {hint}" if hint else "")
        )


def is_dataset_folder(path: Path) -> bool:
    """A folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return ((path / "state.json").is_file() and (path / "dataset_info.json").is_file()) or (path / "dataset_dict.json").is_file()


def csv_records(
    path: Path, columns: Sequence[str], *, hint: str = TEXT_FIELD_HINT, checks: TextChecks | None = None
) -> Iterator[Record]:
    """The ``columns`` of each row of a CSV file with a header row, read as strings, in blocks.

    A ``.tsv`` file (also ``.tsv.gz``…) is read with tabs as separators. Quoting follows CSV
    (as pandas and ``datasets`` read TSV): quoted values may hold newlines and separators.
    Values stay strings (``"1"``, not 1); bytes that are not UTF-8 become U+FFFD and are
    counted (or refused) by ``checks``, as in text files; an empty field is ``""``. pyarrow
    decompresses ``.gz`` / ``.bz2`` files itself.

    ``a.csv = "text,label\\nfine,1\\n"``: ``csv_records(a, ["label"])  ->  [{"label": "1"}]``

    Raises:
        ValueError: no such column (naming the columns there are), not a readable CSV file
            (empty, ragged rows, a row over the 4 MB block), a binary file, a header that is
            not UTF-8, values that are not UTF-8 when ``checks`` is strict (naming the row).
    """
    import pyarrow as pa
    from pyarrow import csv

    checks = checks or TextChecks()
    if path.suffix.lower() in (".csv", ".tsv"):  # not compressed: a NUL byte means binary
        checks.sniff(path)
    delimiter = "\t" if ".tsv" in (s.lower() for s in path.suffixes) else ","
    try:
        reader = csv.open_csv(
            path,
            read_options=csv.ReadOptions(block_size=_CSV_BLOCK_BYTES),
            parse_options=csv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=csv.ConvertOptions(column_types={c: pa.binary() for c in columns}),
        )
        names = _header(reader, path)
        for column in columns:
            require_column(path, column, names, hint=hint)
        number = 0
        for batch in reader:
            values = [batch.column(c).to_pylist() for c in columns]
            for row in zip(*values):
                number += 1
                where = f"{path}: row {number}"
                yield {c: None if v is None else checks.decode(v, where) for c, v in zip(columns, row)}
    except pa.ArrowInvalid as error:
        raise ValueError(f"{path}: not a readable CSV file ({error})") from None


def _header(reader: Any, path: Path) -> list[str]:
    """The column names of a CSV reader; ``ValueError`` when they are not UTF-8 (pyarrow decodes them itself)."""
    try:
        return reader.schema.names
    except UnicodeDecodeError:
        raise ValueError(f"{path}: the header row is not valid UTF-8 text; save the file as UTF-8") from None


def csv_documents(path: Path, column: str, *, checks: TextChecks | None = None) -> Iterator[str]:
    """The ``column`` of a CSV / TSV file (see :func:`csv_records`)."""
    for record in csv_records(path, [column], checks=checks):
        yield record[column] or ""


def parquet_records(
    path: Path, columns: Sequence[str], *, strings: Sequence[str] = (), hint: str = TEXT_FIELD_HINT
) -> Iterator[Record]:
    """The ``columns`` of each row of a Parquet file as Python values, ``_BATCH_ROWS`` rows at a time.

    Raises:
        ValueError: not a Parquet file; no such column; a column of ``strings`` that does
            not hold strings.
    """
    import pyarrow as pa
    from pyarrow import parquet

    try:
        file = parquet.ParquetFile(path)
    except pa.ArrowInvalid as error:
        raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    schema = file.schema_arrow
    for column in columns:
        require_column(path, column, schema.names, hint=hint)
    for column in strings:
        _require_strings(path, column, schema.field(column).type)
    for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=list(columns)):
        yield from batch.to_pylist()


def parquet_documents(path: Path, column: str) -> Iterator[str]:
    """The string ``column`` of a Parquet file (see :func:`parquet_records`)."""
    for record in parquet_records(path, [column], strings=[column]):
        yield record[column] or ""


def dataset_records(
    folder: Path,
    columns: Sequence[str],
    split: str | None,
    *,
    strings: Sequence[str] = (),
    hint: str = TEXT_FIELD_HINT,
) -> Iterator[tuple[str, Record]]:
    """``(where, record)`` for each row of a ``save_to_disk`` folder, memory-mapped, in batches.

    A ``DatasetDict`` folder gives ``split``, or all its splits in their saved order;
    ``where`` names the folder and the split (``"data [train]"``).

    Raises:
        ValueError: no such split (naming the splits there are) or column; a column of
            ``strings`` that does not hold strings.
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
        for column in columns:
            require_column(where, column, dataset.column_names, hint=hint)
        for column in strings:
            _require_strings(where, column, dataset.data.schema.field(column).type)
        for table in dataset.select_columns(list(columns)).with_format("arrow").iter(batch_size=_BATCH_ROWS):
            for record in table.to_pylist():
                yield where, record


def dataset_documents(folder: Path, column: str, split: str | None) -> Iterator[str]:
    """The string ``column`` of a ``save_to_disk`` folder (see :func:`dataset_records`)."""
    for _, record in dataset_records(folder, [column], split, strings=[column]):
        yield record[column] or ""


def _require_strings(where: str | Path, column: str, kind: object) -> None:
    import pyarrow as pa

    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"{where}: the {column!r} column holds {kind}, not strings")
