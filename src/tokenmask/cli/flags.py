"""Flags generated from the config declarations, and configs built from flags and YAML files.

One mechanism for every command: :func:`add_settings` turns each setting of a config
(:func:`tokenmask.settings.leaves`) into a flag (kebab case, type and choices from the field's
type, help from its declaration, the default shown), and :func:`config_from` builds the
config from the settings given: defaults < the ``--config`` YAML file < flags, whatever the
order on the command line. Flags are registered with ``default=SUPPRESS``, so the parsed
namespace holds exactly what the user typed. A brief ``--help`` leaves the advanced settings
out (``setting(advanced=True)``); ``--help-all`` (:func:`add_help_all`) shows every one.

Why not jsonargparse or tyro: jsonargparse lets a flag typed before ``--config`` be overridden
by the file; tyro prints multi-line error boxes and costs its import on ``--help``. argparse
does the parsing here; this module only walks the declarations (about 100 lines).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenmask.settings import Leaf, build, converted, leaves, read_settings_file, spelled
from tokenmask.settings import nested_type as _nested_type


def add_settings(
    parser: argparse.ArgumentParser, config_type: type, *, title: str, brief: bool = False
) -> dict[argparse.Action, str]:
    """One flag per setting of ``config_type`` (positional settings as positional arguments), its
    top-level ones under ``title``, a nested config's under its field's help (:func:`section_title`).

    Which settings of a nested config are offered is the nested field's declaration
    (``exclude``, ``only``: :func:`tokenmask.settings.setting`), not the command's.

    Returns:
        With ``brief``, the flags of the advanced settings, with their help: ``--help`` leaves
        them out (their help is ``SUPPRESS``), :func:`add_help_all` shows them. Empty otherwise.
    """
    groups: dict[tuple[str, ...], Any] = {}
    hidden: dict[argparse.Action, str] = {}
    for leaf in leaves(config_type):
        section = leaf.path[:-1]
        if section not in groups:
            groups[section] = parser.add_argument_group(section_title(config_type, section) or title)
        group = groups[section]
        name = leaf.key.replace("_", "-")
        help_text = (leaf.help + _shown_default(leaf)).replace("%", "%%")
        metavar = leaf.declared.metadata.get("metavar")
        if leaf.declared.metadata.get("positional"):
            counts = ("+", None) if leaf.required else ("*", "?")  # (a list, one value): required or optional
            nargs = counts[0] if leaf.kind is tuple else counts[1]
            parser.add_argument(leaf.key, nargs=nargs, metavar=metavar or name.upper(), default=argparse.SUPPRESS, help=help_text)
            continue  # always shown: the usage line names every positional argument
        if leaf.kind is bool:
            action = argparse.BooleanOptionalAction if leaf.default is True else "store_true"  # --keep-models / --no-keep-models
            flag = group.add_argument(f"--{name}", dest=leaf.key, action=action, default=argparse.SUPPRESS, help=help_text)
        elif leaf.kind is tuple and not leaf.declared.metadata.get("separator"):
            flag = group.add_argument(
                f"--{name}", dest=leaf.key, nargs="+", metavar=metavar or "PATH", required=leaf.required,
                default=argparse.SUPPRESS, help=help_text,
            )  # fmt: skip
        else:  # a comma-separated list is one word, split when the config is built
            kind = str if leaf.kind is tuple else leaf.kind
            flag = group.add_argument(
                f"--{name}", dest=leaf.key, type=kind, choices=leaf.choices, metavar=metavar, required=leaf.required,
                default=argparse.SUPPRESS, help=help_text,
            )  # fmt: skip
        if brief and leaf.advanced and not leaf.required:
            hidden[flag], flag.help = help_text, argparse.SUPPRESS  # out of --help and its usage line
    return hidden


def add_help_all(parser: argparse.ArgumentParser, hidden: Mapping[argparse.Action, str]) -> None:
    """``--help-all``: the help with every setting, ``hidden`` (from :func:`add_settings`) too; and
    a last line of ``--help`` that says how many it leaves out."""
    if hidden:
        parser.epilog = f"{len(hidden)} more settings: --help-all lists them"
    parser.add_argument("--help-all", action=_HelpAll, hidden=dict(hidden), help="show this help with every setting and exit")


class _HelpAll(argparse.Action):
    """Shows the hidden flags' help, prints the help and exits, as ``--help`` does."""

    def __init__(self, option_strings: list[str], dest: str, *, hidden: dict[argparse.Action, str], help: str) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)
        self.hidden = hidden

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        for flag, help_text in self.hidden.items():
            flag.help = help_text
        parser.epilog = None
        parser.print_help()
        parser.exit()


def given_settings(args: argparse.Namespace, config_type: type) -> dict[str, Any]:
    """The settings of ``config_type`` typed on the command line (an empty positional list is none given)."""
    keys = {leaf.key for leaf in leaves(config_type)}
    return {key: value for key, value in vars(args).items() if key in keys and value != []}


def config_from(config_type: type, args: argparse.Namespace, *, config_file: Path | None = None, defaults: Any = None) -> Any:
    """The config the user asked for: defaults, then the YAML ``config_file``, then the flags typed.

    Raises:
        ValueError: an unreadable or malformed file, a key that is no setting (named with the
            file), or a setting out of range.
    """
    return build(config_type, requested_settings(config_type, args, config_file=config_file), defaults)


def requested_settings(config_type: type, args: argparse.Namespace, *, config_file: Path | None = None) -> dict[str, Any]:
    """The settings the user gave, in the file and as flags (flags win), keys in snake case."""
    settings: dict[str, Any] = {}
    if config_file is not None:
        written = read_settings_file(config_file)
        try:
            converted(config_type, written)  # name the file (and the key as written there) when one of its own is wrong
        except ValueError as error:
            raise ValueError(f"{config_file}: {error}") from None
        settings = {str(key).replace("-", "_"): value for key, value in written.items()}
    return {**settings, **given_settings(args, config_type)}


def section_title(config_type: type, section: tuple[str, ...]) -> str:
    """``("loop",) -> "the training loop"``: the help of the field holding a nested config (``""`` for the top level)."""
    for name in section:
        declared = {f.name: f for f in dataclasses.fields(config_type)}[name]
        config_type = _nested_type(config_type, name)
    return str(declared.metadata.get("help", "")) if section else ""


def _shown_default(leaf: Leaf) -> str:
    if leaf.default is None or leaf.default is False or leaf.default in ((), ""):
        return ""
    return f" (default: {spelled(leaf, leaf.default)})"
