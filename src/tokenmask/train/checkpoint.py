"""Checkpoints and final models: Hugging Face model folders, written atomically.

A resumable checkpoint (:func:`save_checkpoint`) is a model folder plus the training state and
a ``manifest.json`` with the size and SHA-256 of every file, written last; a damaged one (a
truncated copy, a flipped bit) fails :func:`verify_checkpoint`. The training state holds
tensors and plain numbers only and loads with ``torch.load(weights_only=True)``. A final model
(:func:`save_model`: ``OUTPUT/model``, fine-tuning's ``OUTPUT/best``) is a clean folder that
can be pushed to the Hub as it is: config, safetensors weights, tokenizer files and a
``README.md`` model card, nothing pickled.

Both are written under a temporary name (``.NAME.partial-PID``), every file fsynced, then
renamed into place (and the parent fsynced), so a crash never leaves a half-written folder
that looks whole. A disk that fills up on the way gives :class:`DiskFull`, which says so and
what is intact, instead of the writer's own error (torch's is ``unexpected pos 15637632 vs
15637520``); the partial copy is removed, so the space it took is free again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from tokenmask.blocks.cache import says_disk_full
from tokenmask.files import follow_umask, fsync_folder, write_json
from tokenmask.train.models import quiet_load_report

STATE_FILE = "training_state.pt"
MANIFEST_FILE = "manifest.json"
CARD_FILE = "README.md"
NOTES_FILE = "tokenmask.json"
"""Where a saved model's run stood (:func:`save_model`'s ``notes``): a snapshot's share, step and tokens."""
SNAPSHOTS = "snapshots"
"""OUTPUT/snapshots/fraction-F: the model at a share of the run's limit (``LoopConfig.snapshots``)."""
MANIFEST_FORMAT = 1
"""``manifest.json``: ``{"format": 1, "files": {"model.safetensors": {"bytes": 17544, "sha256": "9f2c…"}, …}}``."""


class InvalidCheckpoint(ValueError):
    """A checkpoint folder that fails :func:`verify_checkpoint`; the message says why, without the path."""


class DiskFull(OSError):
    """Writing a checkpoint or model folder ran out of disk space; nothing already on disk was replaced."""

    def __init__(self, folder: Path, cause: BaseException) -> None:
        free = shutil.disk_usage(folder.parent).free if folder.parent.exists() else 0
        kept = f"the {folder.name} already there is untouched, and " if folder.exists() else ""
        first = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        super().__init__(
            errno.ENOSPC,
            f"the disk is full: writing {folder} failed ({free / 2**20:.1f} MiB free there now; the writer said: {first}). "
            f"The partial copy was removed; {kept}checkpoints written before are intact. "
            "Free some space, then continue the run with --resume",
        )

    def __str__(self) -> str:  # the message alone, without OSError's "[Errno 28]"
        return str(self.strerror)


# torch.save's zip writer fails on a full disk with a RuntimeError ("[enforce fail at
# inline_container.cc:672] . unexpected pos 576 vs 534") that does not say why: that one counts
# only when the disk is nearly full. Every other writer says it (says_disk_full).
_NEARLY_FULL = 64 * 2**20  # bytes


def _disk_full(error: BaseException, where: Path) -> bool:
    """Whether ``error``, raised while writing under ``where``, means the disk is full."""
    if says_disk_full(error):
        return True
    return "inline_container" in str(error) and shutil.disk_usage(where).free < _NEARLY_FULL


def save_checkpoint(
    folder: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    state: dict[str, Any],
) -> Path:
    """Write ``model`` (safetensors), ``tokenizer``, ``state`` and a manifest to ``folder``, atomically.

    An existing ``folder`` is replaced only once the new one is complete and on disk.
    """

    def write(temporary: Path) -> None:
        _save_pretrained(temporary, model, tokenizer)
        torch.save(state, temporary / STATE_FILE)
        _write_manifest(temporary)

    return _replace_atomically(Path(folder), write)


def save_model(
    folder: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, card: str, notes: Mapping[str, Any] | None = None
) -> Path:
    """Write a clean Hugging Face model folder, atomically: what ``from_pretrained`` and the Hub need, and no more.

    ``folder`` ends up holding ``config.json``, ``model.safetensors``, the tokenizer's files
    and ``card`` as ``README.md`` (:func:`tokenmask.train.card.model_card`; none if empty), and
    ``notes`` (where the run stood: ``{"step": 250, "tokens": 256000}``) as
    :data:`NOTES_FILE`; no training state, no manifest. An existing ``folder`` is replaced only
    once the new one is on disk.
    """

    def write(temporary: Path) -> None:
        _save_pretrained(temporary, model, tokenizer)
        if card:
            (temporary / CARD_FILE).write_text(card, encoding="utf-8")
        if notes is not None:
            (temporary / NOTES_FILE).write_text(json.dumps(dict(notes), indent=1), encoding="utf-8")
        _fsync_files(temporary)

    return _replace_atomically(Path(folder), write)


def snapshot_folder(output: Path, share: float) -> Path:
    """``OUTPUT/snapshots/fraction-0.25``: where the model at ``share`` of the run's limit is saved."""
    return Path(output) / SNAPSHOTS / f"fraction-{share:g}"


def _save_pretrained(folder: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """The model (safetensors) and its tokenizer, as Hugging Face saves them; no "Writing model shards" bar.

    A model of several parts (:class:`~tokenmask.train.detector.ReplacedTokenDetector`) saves
    each part beside the first in the subfolders it names as ``part_folders``; the tokenizer
    goes into each, so that every part opens on its own.
    """
    with quiet_load_report():
        model.save_pretrained(folder, safe_serialization=True)
    for part in (".", *getattr(model, "part_folders", ())):
        tokenizer.save_pretrained(folder / part)


def _replace_atomically(folder: Path, write: Callable[[Path], None]) -> Path:
    """``write`` into ``.NAME.partial-PID`` (files fsynced by ``write``), then rename it to ``folder``.

    A folder already at ``folder`` is moved aside to ``.NAME.previous-PID`` first and removed
    last: :func:`remove_leftovers` tells which of the two survives a kill between the renames.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        write(temporary)
        follow_umask(temporary)  # save_pretrained writes the weights at mkstemp's 0600
    except Exception as error:
        full = _disk_full(error, folder.parent)  # before the clean-up below frees space again
        shutil.rmtree(temporary, ignore_errors=True)
        if full:
            raise DiskFull(folder, error) from error
        raise
    previous = folder.parent / f".{folder.name}.previous-{os.getpid()}"
    if folder.exists():
        folder.rename(previous)
    temporary.rename(folder)
    fsync_folder(folder.parent)
    shutil.rmtree(previous, ignore_errors=True)
    return folder


def load_state(folder: Path) -> dict[str, Any]:
    """The training state of a checkpoint, without unpickling arbitrary objects.

    Raises:
        ValueError: the file holds pickled objects other than tensors and plain values (refused
            by ``weights_only=True``), or is no readable torch file.
    """
    path = Path(folder) / STATE_FILE
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = " ".join(line for line in lines[1:] if not line.startswith(_TORCH_BOILERPLATE)) or type(error).__name__
        if "GLOBAL" in detail:  # torch names the class or function it would have had to import
            raise ValueError(
                f"{path}: refused to load: it holds pickled objects other than tensors and plain values "
                f"(weights_only=True: {detail})"
            ) from None
        raise ValueError(f"{path}: not a readable torch file ({detail})") from None
    except (RuntimeError, EOFError) as error:
        raise ValueError(f"{path}: not a readable torch file ({str(error) or type(error).__name__})") from None


_TORCH_BOILERPLATE = ("Check the documentation", "Please file an issue")
"""Lines of torch's weights-only error that say nothing about the file."""


def verify_checkpoint(folder: Path, *, hashes: bool = True) -> dict[str, Any]:
    """Check a checkpoint folder against its manifest and load its training state.

    ``hashes=False`` checks presence and sizes only, and loads nothing (returns ``{}``): the
    cheap check for checkpoints verified in full when they were written.

    Valid means: ``manifest.json`` is there and readable, lists ``training_state.pt``, every
    listed file exists with the listed size and SHA-256, and the training state loads with
    ``weights_only=True``. A folder without a manifest (incomplete, or written before tokenmask
    kept manifests) is invalid. Files the manifest does not list are ignored.

    Returns:
        The training state (``{"step": 40, "tokens": 5120, "optimizer": {...}, ...}``).

    Raises:
        InvalidCheckpoint: the first problem found, e.g. ``model.safetensors is truncated
            (12,345 of 67,890 bytes)``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidCheckpoint("not a folder")
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        files = manifest["files"]
        sizes = {name: int(entry["bytes"]) for name, entry in files.items()}
        digests = {name: str(entry["sha256"]) for name, entry in files.items()}
    except FileNotFoundError:
        raise InvalidCheckpoint(f"no {MANIFEST_FILE} (incomplete, or written by a tokenmask without manifests)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidCheckpoint(f"{MANIFEST_FILE} is unreadable ({type(error).__name__}: {error})") from None
    if STATE_FILE not in files:
        raise InvalidCheckpoint(f"{MANIFEST_FILE} lists no {STATE_FILE}")
    for name in sorted(files):
        path = folder / name
        if not path.is_file():
            raise InvalidCheckpoint(f"{name} is missing")
        size, expected = path.stat().st_size, sizes[name]
        if size < expected:
            raise InvalidCheckpoint(f"{name} is truncated ({size:,} of {expected:,} bytes)")
        if size > expected:
            raise InvalidCheckpoint(f"{name} has {size:,} bytes, {expected:,} expected")
        if hashes and _sha256(path) != digests[name]:
            raise InvalidCheckpoint(f"{name} is corrupted (its SHA-256 differs from the manifest)")
    if not hashes:
        return {}
    try:
        return load_state(folder)
    except ValueError as error:
        raise InvalidCheckpoint(str(error).replace(f"{folder / STATE_FILE}: ", f"{STATE_FILE}: ")) from None


def checkpoint_folders(folder: Path) -> list[Path]:
    """The ``step-N`` folders in ``folder``, newest (highest N) first; other names are not checkpoints.

    ``step-6, step-12, .step-18.partial-77, notes`` -> ``[step-12, step-6]``.
    """
    found = []
    for path in Path(folder).glob("step-*"):
        number = path.name[len("step-") :]
        if number.isdigit() and path.is_dir():
            found.append((int(number), path))
    return [path for _, path in sorted(found, reverse=True)]


def newest_valid_checkpoint(folder: Path, *, report: Callable[[str], None] = lambda text: None) -> Path | None:
    """The newest ``step-N`` in ``folder`` that passes :func:`verify_checkpoint`, or None.

    Each newer one that fails is reported, e.g. ``skipping checkpoints/step-40: model.safetensors
    is truncated (12,345 of 67,890 bytes)``.
    """
    for path in checkpoint_folders(folder):
        try:
            verify_checkpoint(path)
        except InvalidCheckpoint as error:
            report(f"skipping {path.parent.name}/{path.name}: {error}")
            continue
        return path
    return None


def remove_leftovers(folder: Path) -> list[str]:
    """Clean up after a run killed while :func:`save_checkpoint` wrote into ``folder``.

    Temporary folders (``.NAME.partial-PID``) are removed. A replaced folder
    (``.NAME.previous-PID``) is renamed back to ``NAME`` if the kill came between the two
    renames (``NAME`` is missing), and removed otherwise. Returns what was removed or restored.
    """
    folder = Path(folder)
    done = []
    for path in sorted(folder.glob(".*.partial-*")) + sorted(folder.glob(".*.previous-*")):
        if not path.is_dir():
            continue
        name, _, kind = path.name[1:].rpartition(".")
        if kind.startswith("previous-") and not (folder / name).exists():
            path.rename(folder / name)
            done.append(f"{path.name} (restored as {name})")
        else:
            shutil.rmtree(path, ignore_errors=True)
            done.append(path.name)
    return done


def _write_manifest(folder: Path) -> None:
    """fsync every file of ``folder`` and the folders, then write the manifest of their sizes and hashes (atomically, fsynced)."""
    paths = _fsync_files(folder)
    files = {path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "sha256": _sha256(path)} for path in paths}
    write_json(folder / MANIFEST_FILE, {"format": MANIFEST_FORMAT, "files": files}, indent=1)


def _fsync_files(folder: Path) -> list[Path]:
    """fsync every file of ``folder`` and every folder in it; returns the files, sorted."""
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in paths:
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
    for sub in sorted({p.parent for p in folder.rglob("*")} | {folder}):
        fsync_folder(sub)
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
