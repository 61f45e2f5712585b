"""Files are written whole or not at all (tokenmask.files), and plots through them (tokenmask.plots)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tokenmask.files import atomic_file, follow_umask, umask, write_json, write_text
from tokenmask.plots import pyplot, save_png


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "deep" / "record.json"
    write_json(path, {"a": [1, 2], "name": "é"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": [1, 2], "name": "é"} and "é" in path.read_text(encoding="utf-8")
    write_text(path, "second")
    assert path.read_text() == "second" and [p.name for p in path.parent.iterdir()] == ["record.json"]


def test_an_error_midway_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "index.npy"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(path, binary=True) as handle:
        handle.write(b"half of the new")
        raise RuntimeError("killed while writing")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["index.npy"]


def test_a_new_file_takes_the_umask_not_a_private_mode(tmp_path):
    before = os.umask(0o022)
    try:
        path = write_text(tmp_path / "model.txt", "weights")
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the group may read what a run wrote (not mkstemp's 0600)


def test_a_plot_is_a_png_written_through_the_same_helper(tmp_path):
    figure, axes = pyplot().subplots()
    axes.plot([0, 1], [1, 0])
    path = save_png(figure, tmp_path / "plot.png")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and [p.name for p in tmp_path.iterdir()] == ["plot.png"]


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_umask_is_read_without_changing_it(mask):
    before = os.umask(mask)
    try:
        assert umask() == mask and umask() == mask  # read twice: the first read left it as it was
    finally:
        os.umask(before)


def test_follow_umask_gives_a_library_written_folder_the_modes_of_any_new_file(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    weights, card = folder / "model.safetensors", folder / "sub" / "README.md"
    weights.write_bytes(b"x")
    card.write_text("card")
    weights.chmod(0o600)  # as save_pretrained leaves safetensors (mkstemp)
    (folder / "sub").chmod(0o700)  # as tempfile.mkdtemp makes a folder
    card.chmod(0o755)  # an executable bit is taken away, never given
    before = os.umask(0o027)
    try:
        follow_umask(folder)
    finally:
        os.umask(before)
    modes = {path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode) for path in (folder, *folder.rglob("*"))}
    assert modes == {"model": 0o750, "model/sub": 0o750, "model/model.safetensors": 0o640, "model/sub/README.md": 0o640}
