"""Files written whole or not at all: the one way tokenmask writes a file that a kill must not cut.

Every writer goes through :func:`atomic_file`: the content goes to a temporary file beside the
target (``.NAME.partial-PID``, in the same folder so the rename stays on one file system), is
flushed and fsynced, then renamed over the target, and the folder is fsynced so the rename
survives a power cut. A reader (or a resumed run) sees the old file or the new one, never
half of one; on an error the temporary file is removed and the old file is left as it was.
The file gets the user's umask, as any file ``open`` creates (not ``mkstemp``'s 0600); a folder
that libraries wrote into (``save_pretrained`` writes safetensors at 0600) is given the same
modes by :func:`follow_umask`. Standard library only.

Example::

    write_json(Path("runs/study/study.json"), {"complete": False})
    with atomic_file(Path("index.npy"), binary=True) as handle:
        numpy.save(handle, vectors)
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload


@overload
def atomic_file(path: str | Path, *, binary: Literal[False] = ...) -> contextlib.AbstractContextManager[IO[str]]: ...


@overload
def atomic_file(path: str | Path, *, binary: Literal[True]) -> contextlib.AbstractContextManager[IO[bytes]]: ...


def atomic_file(path: str | Path, *, binary: bool = False) -> contextlib.AbstractContextManager[IO[Any]]:
    """A handle to write ``path`` through: the file appears, whole, when the ``with`` block ends.

    The parent folder is created if missing. Text is written as UTF-8.

    Raises:
        OSError: the folder cannot be written (the disk is full, no permission); nothing is
            left behind and the old file, if any, is unchanged.
    """
    return _atomic(Path(path), binary)


@contextlib.contextmanager
def _atomic(path: Path, binary: bool) -> Iterator[IO[Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(temporary, "wb") if binary else open(temporary, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_file`); returns the path."""
    with atomic_file(path) as handle:
        handle.write(text)
    return Path(path)


def write_json(path: str | Path, content: Any, *, indent: int | None = 2) -> Path:
    """Write ``content`` as JSON (UTF-8, non-ASCII kept) to ``path`` atomically; returns the path.

    ``write_json(p, {"a": [1, 2]})`` leaves ``{\\n  "a": [\\n    1,\\n    2\\n  ]\\n}`` in ``p``.
    """
    return write_text(path, json.dumps(content, indent=indent, ensure_ascii=False))


def fsync_folder(folder: Path) -> None:
    """Make a rename (or a new file) in ``folder`` durable; some file systems (and Windows) cannot, which is fine."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def umask() -> int:
    """The process's umask (``0o022`` on most systems), read from ``/proc`` where Linux has it,
    else set and restored at once (which another thread could observe for an instant)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text(encoding="ascii").splitlines()
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(folder: Path) -> None:
    """Give ``folder``, and every file and folder in it, the mode ``open`` and ``mkdir`` give under
    the user's umask: 0644 files and 0755 folders under umask 022 (0640/0750 under 027), so that
    the group reads a model as it reads any other file. Files get no executable bit.

    For folders written by libraries that create files through ``mkstemp`` (mode 0600): the
    safetensors weights of ``save_pretrained``, a ``tempfile.mkdtemp`` staging folder (0700).
    """
    mask = umask()
    for path in (folder, *folder.rglob("*")):
        if path.is_symlink():
            continue
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)
