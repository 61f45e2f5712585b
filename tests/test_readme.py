"""The README's Python example runs and prints exactly what the README shows."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_output_matches():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"## Python API\s+```python\n(.*?)```\s+prints\s+```text\n(.*?)```", text, re.S)
    assert match, "README lost its Python API example"
    code, expected = match.groups()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected


def test_readme_examples_import_only_the_public_api():
    # user code never depends on the internal layout: `tokenmask` (and `tokenmask.masking`, the bare functions)
    import tokenmask

    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    imports = [line.strip() for block in blocks for line in block.splitlines() if re.match(r"\s*(from|import) tokenmask", line)]
    assert imports, "the README lost its examples"
    for line in imports:
        module, names = re.match(r"from (\S+) import (.*)", line).groups()
        assert module in ("tokenmask", "tokenmask.masking"), line
        for name in re.sub(r"#.*", "", names).replace("(", "").replace(")", "").split(","):
            assert name.strip() in tokenmask.__all__ or module == "tokenmask.masking", line
