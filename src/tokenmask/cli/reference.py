"""The settings reference, generated: every flag of every command with its type, default, range and help.

Written from the same declarations the parser reads (:data:`tokenmask.cli.parser.COMMANDS`,
:func:`tokenmask.settings.leaves`), so the page cannot drift from ``--help``: the docs build
(``docs/hooks.py``) calls :func:`settings_reference` every time.
"""

from __future__ import annotations

import re

from tokenmask.cli.flags import section_title
from tokenmask.cli.parser import COMMANDS, Command
from tokenmask.settings import KIND_WORDS, Leaf, bounds, leaves, spelled


def settings_reference() -> str:
    """The reference as Markdown: one section per command, one table per group of its flags."""
    lines = [
        "# Settings reference",
        "",
        "Every flag of every command, generated from the settings' declarations when the docs are built "
        "(the same declarations `--help` and the YAML configs come from). A setting's YAML key is its flag "
        "without the leading dashes (`max-steps` or `max_steps`); `--config FILE` reads such a file, and a run's "
        "`OUTPUT/config.yaml` is one. The `--help` of a long command lists its common settings; `--help-all`, "
        "like this page, every one.",
    ]
    for command in COMMANDS:
        lines += ["", f"## tokenmask {command.name}", "", command.description]
        for title, rows in _sections(command):
            lines += ["", f"**{title}**", "", "| flag | type | default | range | meaning |", "|---|---|---|---|---|"]
            lines += rows
    return "\n".join(lines) + "\n"


def _sections(command: Command) -> list[tuple[str, list[str]]]:
    """``(heading, table rows)`` per group of flags, in ``--help``'s order."""
    groups: dict[str, list[str]] = {}
    for config, title in [(command.config, command.title), *((options, "command line") for options in command.options)]:
        for leaf in leaves(config):
            heading = section_title(config, leaf.path[:-1]) or title
            groups.setdefault(heading, []).append(_row(leaf))
    return list(groups.items())


def _row(leaf: Leaf) -> str:
    metadata = leaf.declared.metadata
    name = leaf.key.replace("_", "-")
    if metadata.get("positional"):
        flag = f"`{metadata.get('metavar') or name.upper()}` (positional)"
    elif leaf.kind is bool and leaf.default is True:
        flag = f"`--{name}` / `--no-{name}`"
    else:
        flag = f"`--{name}`"
    default = "required" if leaf.required else ("none" if leaf.default in (None, ()) else f"`{spelled(leaf, leaf.default)}`")
    cells = [flag, _kind(leaf), default, bounds(metadata), _escaped(leaf.help)]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _escaped(text: str) -> str:
    """Help text as Markdown shows it: brackets escaped (``hf:NAME[:CONFIG]`` is no link), code spans kept."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else part.replace("[", "\\[").replace("]", "\\]") for part in parts)


def _kind(leaf: Leaf) -> str:
    """``whole number``, ``one of linear, cosine``, ``comma-separated numbers``, ``texts``…"""
    if leaf.choices is not None:
        kind = "one of " + ", ".join(map(str, leaf.choices))
    elif leaf.kind is tuple:
        separated = "comma-separated " if leaf.declared.metadata.get("separator") == "," else ""
        kind = f"{separated}{KIND_WORDS[leaf.item]}s" + (f" or {leaf.declared.metadata['none']}" if leaf.item_optional else "")
    else:
        kind = KIND_WORDS[leaf.kind]
    return kind + (" or none" if leaf.optional else "")
