"""The declared dependencies: every package src/ imports is declared, `make lowest` pins each
floor, and the code is Python 3.10 as ``requires-python`` says.

`make lowest` installs requirements/lowest.txt and runs a smoke subset there; these checks keep
that file and pyproject.toml from drifting apart (torch excepted: see requirements/lowest.txt).
Only 3.11 is installed here, so 3.10 is checked by grammar and by the modules imported.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEPT_AT_TESTED = {"torch"}  # any other torch from PyPI is a multi-GB CUDA build here


def declared() -> dict[str, str]:
    """``{"transformers": "4.48", ...}`` from pyproject.toml's ``dependencies`` (a regex: tomllib is 3.11+)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S).group(1)
    return {name.lower(): floor for name, floor in re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9.]+)"', block)}


def pinned() -> dict[str, str]:
    lines = (ROOT / "requirements" / "lowest.txt").read_text(encoding="utf-8").splitlines()
    return {name.lower(): version for name, version in (line.split("==") for line in lines if "==" in line)}


def imported_modules() -> set[str]:
    """Top-level modules imported anywhere in src/ (lazy imports inside functions included)."""
    found = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_imported_package_is_declared():
    third_party = imported_modules() - set(sys.stdlib_module_names) - {"tokenmask"}
    distributions = packages_distributions()
    needed = {distributions[module][0].lower() for module in third_party}  # e.g. yaml -> pyyaml
    assert needed == set(declared()), f"imported: {sorted(needed)}; declared: {sorted(declared())}"


def test_make_lowest_installs_every_declared_floor():
    floors, pins = declared(), pinned()
    for name, floor in floors.items():
        if name in KEPT_AT_TESTED:
            continue
        assert pins.get(name, "").split(".")[: len(floor.split("."))] == floor.split("."), (name, floor, pins.get(name))
        assert all(part == "0" for part in pins[name].split(".")[len(floor.split(".")) :]), (name, pins[name])


def test_the_code_is_python_3_10():
    for path in (ROOT / "src").rglob("*.py"):
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 10))  # e.g. no except*
    assert not imported_modules() & {"tomllib"}  # the one top-level module new in 3.11's standard library
