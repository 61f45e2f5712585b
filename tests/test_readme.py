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


def test_the_readme_is_an_entry_page():
    assert len(text().splitlines()) <= 250


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
    assert "tokenizer train" in commands and "compare-augment" in commands
    listed = set(re.findall(r"^\| `tokenmask ([a-z -]+?)` \|", section("Commands"), re.M))
    assert listed == commands


def test_the_links_lead_somewhere():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (ROOT / link).exists(), link
