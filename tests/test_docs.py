"""The documentation stays true: the code blocks of README.md, docs/**/*.md and
benchmarks/RESULTS.md (a page of the site) run, or say why not.

- ```python blocks run, one page at a time in one namespace (a page's blocks build on each other),
  in a scratch folder that holds the small corpus files the pages name (``data/``,
  ``more/*.parquet``); where a page shows what a block prints (a line ``prints`` and a
  ```text block right after it), the output must be exactly that. They import only the public
  API: ``tokenmask`` (its ``__all__``) and ``tokenmask.masking``.
- ```bash blocks: every ``tokenmask …`` line (also after ``torchrun … -m`` or ``accelerate launch … -m``)
  is parsed by the real parser, so every command and flag shown exists; ``make X`` needs a target X;
  ``python benchmarks/B.py --flag …`` (RESULTS.md: minutes each, not run) needs the script and each
  flag declared in it.
- ```text blocks are output, not run. A block of any other kind, or one that cannot be checked,
  carries ``<!-- not run: REASON -->`` on the line before it (blank lines between allowed); a
  python block so marked is still compiled.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    expected: str | None  # what the page says it prints
    not_run: str | None  # the reason given, when marked

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def read_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[tuple[int, str, str, int]] = []  # (start, lang, code, end)
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            found.append((i, opening["lang"], "\n".join(lines[i + 1 : end]) + "\n", end))
            i = end
        i += 1
    blocks = []
    for index, (start, lang, code, end) in enumerate(found):
        before = _previous_text(lines, start)
        marker = NOT_RUN.match(before) if before is not None else None
        expected = None
        after = _next_text(lines, end)
        following = found[index + 1] if index + 1 < len(found) else None
        shows_output = after is not None and lines[after].strip() == "prints" and following and following[1] == "text"
        if shows_output and _next_text(lines, after) == following[0]:
            expected = following[2]
        page = str(path.relative_to(root))
        blocks.append(Block(page, start + 1, lang, code, expected, marker["reason"] if marker else None))
    return blocks


def _previous_text(lines: list[str], start: int) -> str | None:
    j = start - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return lines[j].strip() if j >= 0 else None


def _next_text(lines: list[str], end: int) -> int | None:
    j = end + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j if j < len(lines) else None


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
PYTHON_PAGES = sorted({b.page for b in ALL_BLOCKS if b.lang == "python" and b.not_run is None})


def test_the_pages_have_examples():
    assert "README.md" in PYTHON_PAGES and "docs/masking.md" in PYTHON_PAGES
    assert any(b.expected for b in ALL_BLOCKS if b.page == "README.md"), "README lost its example's output"


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=str)
def test_every_block_is_checked_or_says_why(block):
    if block.not_run is not None:
        if block.lang == "python":
            compile(block.code, str(block), "exec")  # not run, but still Python
        return
    assert block.lang in ("python", "bash", "text"), (
        f"{block}: a ```{block.lang or '(no language)'} block is not checked: label it python, bash or text, "
        "or put <!-- not run: REASON --> before it"
    )


# --- python blocks -----------------------------------------------------------------------------

DRIVER = r"""
import contextlib, io, json, sys, traceback
pages = json.load(sys.stdin)
results = {}
for page, blocks in pages.items():
    namespace = {"__name__": "__main__"}
    outputs = []
    for line, code in blocks:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{page}:{line}", "exec"), namespace)
        except BaseException:
            outputs.append({"line": line, "error": traceback.format_exc()})
            break
        outputs.append({"line": line, "stdout": out.getvalue()})
    results[page] = outputs
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(results, f)
"""


def _sandbox(folder: Path) -> None:
    """The small corpus the pages' examples name: ``data/`` (text) and ``more/*.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paragraphs = [f"Scene {i}. Enter the king, with lords and attendants; the queen follows, and speaks. " * 3 for i in range(80)]
    (folder / "data").mkdir()
    (folder / "data" / "scenes.txt").write_text("\n\n".join(paragraphs[:60]) + "\n", encoding="utf-8")
    (folder / "more").mkdir()
    pq.write_table(pa.table({"text": paragraphs[60:]}), folder / "more" / "part-0.parquet")


@pytest.fixture(scope="module")
def python_results(tmp_path_factory):
    """Every page's python blocks, run in one process (one import of torch), in a scratch folder."""
    folder = tmp_path_factory.mktemp("docs-examples")
    _sandbox(folder)
    pages = {
        page: [(b.line, b.code) for b in ALL_BLOCKS if b.page == page and b.lang == "python" and b.not_run is None]
        for page in PYTHON_PAGES
    }
    out = folder / "results.json"
    env = {**os.environ, "TOKENMASK_CACHE": str(folder / "cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, str(out)], input=json.dumps(pages), capture_output=True, text=True,
        cwd=folder, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_examples_run_and_print_what_the_page_shows(page, python_results):
    blocks = {b.line: b for b in ALL_BLOCKS if b.page == page and b.lang == "python" and b.not_run is None}
    ran = python_results[page]
    for outcome in ran:
        block = blocks[outcome["line"]]
        assert "error" not in outcome, f"{block} failed:\n{outcome.get('error')}"
        if block.expected is not None:
            assert outcome["stdout"] == block.expected, f"{block} printed something else than the page shows"
    assert len(ran) == len(blocks)


def test_examples_import_only_the_public_api():
    # user code never depends on the internal layout: `tokenmask` (and `tokenmask.masking`, the bare functions)
    import tokenmask
    import tokenmask.masking

    imports = [
        (block, line.strip())
        for block in ALL_BLOCKS
        if block.lang == "python"
        for line in block.code.splitlines()
        if re.match(r"\s*(from|import) tokenmask", line)
    ]
    assert imports, "the pages lost their examples"
    for block, line in imports:
        match = re.match(r"from (\S+) import (.*)", line)
        assert match, f"{block}: {line} (import names from tokenmask, not the module)"
        module, names = match.groups()
        assert module in ("tokenmask", "tokenmask.masking"), f"{block}: {line}"
        public = tokenmask.__all__ if module == "tokenmask" else tokenmask.masking.__all__
        for name in re.sub(r"#.*", "", names).replace("(", "").replace(")", "").split(","):
            assert name.strip() in public, f"{block}: {name.strip()} is not in {module}.__all__"


# --- bash blocks -------------------------------------------------------------------------------


def command_lines(code: str) -> list[list[str]]:
    """The commands of a bash block, continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def tokenmask_argv(words: list[str]) -> list[str] | None:
    """The arguments after ``tokenmask`` (``tokenmask ARGS``, ``… -m tokenmask ARGS``, after any
    ``NAME=value`` environment settings: ``HF_HUB_OFFLINE=1 tokenmask ARGS``), or None."""
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    if not words:
        return None
    if words[0] == "tokenmask":
        return words[1:]
    if words[0] in ("torchrun", "accelerate", "python", "python3") and "-m" in words:
        at = words.index("-m")
        if words[at + 1 : at + 2] == ["tokenmask"]:
            return words[at + 2 :]
    return None


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, re.M))


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang == "bash" and b.not_run is None], ids=str)
def test_command_lines_parse(block):
    from tokenmask.cli.parser import build_parser

    lines = command_lines(block.code)
    assert lines, f"{block}: an empty bash block"
    for words in lines:
        if words[0] == "make":
            assert set(words[1:]) <= make_targets(), f"{block}: {shlex.join(words)}: no such make target"
            continue
        if Path(words[0]).name.startswith("python") and words[1].startswith("benchmarks/"):
            script = ROOT / words[1]
            assert script.is_file(), f"{block}: no {words[1]}"
            source = script.read_text(encoding="utf-8")
            for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                assert f'"{flag}"' in source, f"{block}: {words[1]} declares no {flag}"
            continue
        argv = tokenmask_argv(words)
        assert argv is not None, (
            f"{block}: {shlex.join(words)} is not a tokenmask or make command: mark the block <!-- not run: REASON -->"
        )
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                build_parser().parse_args(argv)
        except SystemExit as exit:
            pytest.fail(
                f"{block}: `tokenmask {shlex.join(argv)}` is refused by the parser (exit {exit.code}):\n{errors.getvalue()}"
            )


def test_the_parser_check_can_fail():
    from tokenmask.cli.parser import build_parser

    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        build_parser().parse_args(tokenmask_argv(command_lines("tokenmask pretrain --no-such-flag 1\n")[0]))


def test_the_reader_finds_outputs_markers_and_commands(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1)\n```\n\nprints\n\n```text\n1\n```\n\n"
        "<!-- not run: trains for 9 minutes -->\n\n```bash\ntokenmask pretrain \\\n    --max-steps 3  # a comment\n```\n",
        encoding="utf-8",
    )
    python, text, bash = read_blocks(page, tmp_path)
    assert (python.lang, python.code, python.expected, python.not_run) == ("python", "print(1)\n", "1\n", None)
    assert (text.expected, text.not_run) == (None, None)
    assert (bash.line, bash.not_run) == (13, "trains for 9 minutes")
    assert command_lines(bash.code) == [["tokenmask", "pretrain", "--max-steps", "3"]]
    assert tokenmask_argv(["torchrun", "--nproc_per_node", "8", "-m", "tokenmask", "fill", "m", "x"]) == ["fill", "m", "x"]


# --- the generated pages -----------------------------------------------------------------------


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_public_name_is_on_an_api_page():
    hooks = _hooks()
    pages, unplaced = hooks.api_pages()
    assert not unplaced, unplaced
    assert set(pages) == {page.path for page in hooks.API_PAGES}
    assert "::: " in pages["api/masking.md"] and "tokenmask.experiments.study.run_study" in pages["api/experiments.md"]


def test_sphinx_roles_become_code():
    hooks = _hooks()
    text = "see :func:`tokenmask.masking.select.select_units` and :class:`~tokenmask.masking.MaskingConfig`"
    assert hooks._ROLE.sub(hooks._as_code, text) == "see `tokenmask.masking.select.select_units` and `MaskingConfig`"
