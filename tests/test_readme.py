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
