"""The README is an entry page: short, with the quick start, one tested example, every command
and links that lead somewhere. Its code blocks run in tests/test_docs.py, with the docs' blocks."""

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def text() -> str:
    return README.read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text(), re.M | re.S)
    assert match, f"README lost its section {title!r}"
    return match.group(1)


WORD_BUDGET = 1800
PARAGRAPH_BUDGET = 120
LIST_ITEM = re.compile(r"(?:[-*+]|\d+\.)\s")


def paragraphs(markdown: str) -> list[str]:
    """The prose of a Markdown page, one string per paragraph: a run of non-blank lines outside
    fenced code blocks, each list item starting a paragraph of its own. Tables, headings and HTML
    comments are not prose: their lines end a paragraph."""
    found, current, in_code = [], [], False
    for line in [*markdown.splitlines(), ""]:
        stripped = line.strip()
        fence = stripped.startswith("```")
        in_code ^= fence
        prose = bool(stripped) and not (fence or in_code or stripped.startswith(("|", "#", "<!--")))
        if current and (not prose or LIST_ITEM.match(stripped)):
            found.append(" ".join(current))
            current = []
        if prose:
            current.append(stripped)
    return found


def test_the_readme_is_an_entry_page():
    """A word budget, counted as ``wc -w`` counts (every word of the file, code blocks and tables
    included), and no paragraph of prose (``paragraphs``) over PARAGRAPH_BUDGET words: tables and
    code blocks count towards the total only."""
    assert len(text().split()) <= WORD_BUDGET
    longest = max(paragraphs(text()), key=lambda paragraph: len(paragraph.split()))
    assert len(longest.split()) <= PARAGRAPH_BUDGET, longest[:80]


def test_paragraphs_are_prose_blocks():
    page = (
        "One two\nthree.\n\n| a | b |\n|---|---|\n```bash\nmake demo\n```\n- item one\n- item two\n  goes on\n## Heading\nLast."
    )
    assert paragraphs(page) == ["One two three.", "- item one", "- item two goes on", "Last."]


def test_the_quick_start_is_make_demo_and_make_test():
    commands = re.search(r"```bash\n(.*?)```", section("Quick start"), re.S).group(1)
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == ["make demo", "make test"]


def test_the_python_example_shows_what_it_prints():
    assert re.search(r"```python\n.*?```\s+prints\s+```text\n.*?```", section("Python"), re.S)
    assert "Trainer(" in section("Python") and "MaskingCallback(collator)" in section("Python")


def test_the_command_table_lists_every_command():
    from tokenmask.cli.parser import build_parser

    def names(parser: argparse.ArgumentParser, prefix: str = ""):
        """``mask``, …, ``tokenizer train``: the leaves of the subcommand tree."""
        for action in parser._actions:  # argparse keeps its subcommands there, and nowhere public
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    nested = list(names(sub, f"{prefix}{name} "))
                    yield from nested or [f"{prefix}{name}"]

    commands = set(names(build_parser()))
    assert "tokenizer train" in commands and "study" in commands
    listed = set(re.findall(r"^\| `tokenmask ([a-z -]+?)` \|", section("Commands"), re.M))
    assert listed == commands


def test_the_links_lead_somewhere():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (ROOT / link).exists(), link
