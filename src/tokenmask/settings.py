"""Settings declared once: each config field carries its help text, its range and its flag name.

Every config of tokenmask is a frozen dataclass whose fields are made with :func:`setting`;
:func:`check` validates a config against those declarations (ranges, ``Literal`` choices),
:func:`leaves` walks them (nested configs flattened), :func:`flatten` / :func:`build` turn a
config into flat ``{key: value}`` settings and back. The command line (:mod:`tokenmask.cli.flags`)
and the YAML files that replay a run are generated from the same walk, so a setting is written
in one place. Standard library only: ``tokenmask --help`` imports this without torch.

Example::

    @dataclass(frozen=True)
    class Demo:
        steps: int = setting(10, help="optimizer steps", ge=1)
        def __post_init__(self) -> None:
            check(self)

    Demo(steps=0)  # ValueError: steps must be >= 1; got 0
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin


def setting(
    default: Any = MISSING,
    *,
    help: str,
    factory: Any = MISSING,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    flag: str | None = None,
    positional: bool = False,
    choices: tuple[Any, ...] | None = None,
    separator: str | None = None,
    none: str = "none",
    metavar: str | None = None,
    exclude: tuple[str, ...] = (),
    only: tuple[str, ...] | None = None,
    reword: Mapping[str, str] | None = None,
    advanced: bool = False,
) -> Any:
    """A dataclass field with its declaration: help text, bounds, and how the command line names it.

    Args:
        default: the default value (or ``factory`` for a nested config / mutable default).
        help: one sentence for ``--help`` and the docs; the default is appended by the CLI.
        ge, gt, le, lt: bounds checked by :func:`check` (None values are not checked).
        flag: the flag's name where it differs from the field's (``"selection"`` for ``mode``).
        positional: a positional argument of the command (corpora, data files).
        choices: the choices offered on the command line, where fewer than the type allows.
        separator: a list's items in one command-line word, split at this (``--rates 0.15,0.3``);
            None: one word per item (``--eval a.txt b.txt``).
        none: how the command line and YAML spell a list item that is None (``all``, ``none``).
        metavar: how ``--help`` names the value (``DATA``, ``KIND=RATES``); default the flag's name.
        exclude: for a nested config, the keys of its settings that the outer config sets itself
            (a study sets each cell's ``strategy``): they are no settings of the outer config.
        only: for a nested config, the keys of the only settings of it that the outer config
            offers (the others keep their defaults there).
        reword: for a nested config, ``{key: help}`` where a setting means something more
            specific in the outer config (a study's ``output`` is the study's folder).
        advanced: a setting few runs change (a cache folder, a warm-up of the head): a long
            command's ``--help`` leaves it to ``--help-all``; it is a flag and a YAML key as any other.
    """
    metadata = {
        "help": help, "ge": ge, "gt": gt, "le": le, "lt": lt, "flag": flag, "positional": positional, "choices": choices,
        "separator": separator, "none": none, "metavar": metavar, "exclude": exclude, "only": only,
        "reword": dict(reword or {}), "advanced": advanced,
    }  # fmt: skip
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Leaf:
    """One setting of a (possibly nested) config: where it sits and how it is typed."""

    path: tuple[str, ...]
    """Field names from the top config down, e.g. ``("masking", "selection", "mode")``."""
    declared: dataclasses.Field
    kind: type
    """The value's type without None: int, float, str, bool, or tuple for a list."""
    optional: bool
    choices: tuple[Any, ...] | None
    default: Any
    item: type = str
    """A list's item type without None (``tuple[float | None, ...]`` -> float)."""
    item_optional: bool = False
    """Whether a list's items may be None (spelled by the declaration's ``none`` word)."""
    reworded: str | None = None
    """The help this setting has in an outer config, where it means something more specific."""

    @property
    def key(self) -> str:
        """The flat name of the setting: the flag's name in snake case (``mlm_probability``, ``selection``)."""
        return (self.declared.metadata.get("flag") or self.path[-1]).replace("-", "_")

    @property
    def required(self) -> bool:
        """A setting without a default: the command line asks for it (``embed --output``)."""
        return self.declared.default is MISSING and self.declared.default_factory is MISSING

    @property
    def help(self) -> str:
        return self.reworded or str(self.declared.metadata.get("help", ""))

    @property
    def advanced(self) -> bool:
        """A setting few runs change: a long command's ``--help`` leaves it to ``--help-all``."""
        return bool(self.declared.metadata.get("advanced"))


def leaves(
    config_type: type,
    defaults: Any = None,
    prefix: tuple[str, ...] = (),
    *,
    keep: Callable[[str], bool] = lambda key: True,
    reword: Mapping[str, str] | None = None,
) -> Iterator[Leaf]:
    """Every setting of ``config_type``, nested configs flattened, with its default.

    ``defaults`` is an instance whose values are the defaults (a nested config's defaults come
    from its field's default factory when not given). A nested config's field may declare
    ``exclude`` or ``only`` (which of its settings are settings of the outer config: the outer
    config sets the others itself, or leaves them at their defaults) and ``reword`` (the
    meaning some of them take there, as help text).
    """
    hints = _hints(config_type)
    for f in dataclasses.fields(config_type):
        if dataclasses.is_dataclass(hints[f.name]):
            default = getattr(defaults, f.name) if defaults is not None else _nested_default(f, hints[f.name])
            inner = _offered(keep, f.metadata.get("exclude", ()), f.metadata.get("only"))
            helps = {**f.metadata.get("reword", {}), **(reword or {})}  # the outer config's words win
            yield from leaves(hints[f.name], default, (*prefix, f.name), keep=inner, reword=helps)
            continue
        default = getattr(defaults, f.name) if defaults is not None else _field_default(f)
        kind, optional, choices = _describe(hints[f.name])
        item, item_optional, _ = _describe(get_args(_without_none(hints[f.name]))[0]) if kind is tuple else (str, False, None)
        leaf = Leaf((*prefix, f.name), f, kind, optional, f.metadata.get("choices") or choices, default, item, item_optional)
        if keep(leaf.key):
            yield replace(leaf, reworded=(reword or {}).get(leaf.key))


def _offered(outer: Callable[[str], bool], excluded: Collection[str], only: Collection[str] | None) -> Callable[[str], bool]:
    """Whether a nested config's setting is one of the outer config's: offered by every level above."""
    return lambda key: outer(key) and key not in excluded and (only is None or key in only)


def check(config: Any) -> None:
    """Validate every field of ``config`` against its declared bounds and ``Literal`` choices.

    Raises:
        ValueError: naming the first field out of range, e.g. ``lr must be > 0; got -1.0``.
    """
    config_type: type = type(config)  # `type(Any)` is `type[Any]`, which mypy does not take as Hashable
    hints = _hints(config_type)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value is None or dataclasses.is_dataclass(value):
            continue
        name = f.metadata.get("flag") or f.name  # the name the user knows it by
        _, _, choices = _describe(hints[f.name])
        if choices is not None and value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
        problem = _out_of_bounds(value, f.metadata)
        if problem:
            raise ValueError(f"{name} must be {problem}; got {value!r}")


def flatten(config: Any) -> dict[str, Any]:
    """``{key: value}`` for every setting of ``config`` (tuples as lists): what a run's config.yaml holds."""
    flat = {}
    for leaf in leaves(type(config), config):
        flat[leaf.key] = list(leaf.default) if isinstance(leaf.default, tuple) else leaf.default
    return flat


def spelled(leaf: Leaf, value: Any) -> str:
    """``value`` as the command line spells it: ``(0.15, 0.3) -> "0.15,0.3"``, ``(None, 100) -> "all,100"``."""
    if isinstance(value, tuple):
        words = [leaf.declared.metadata.get("none", "none") if v is None else spelled(leaf, v) for v in value]
        return (leaf.declared.metadata.get("separator") or " ").join(words)
    return f"{value:g}" if isinstance(value, float) else str(value)


def build(config_type: type, values: Mapping[str, Any], defaults: Any = None) -> Any:
    """A ``config_type`` from flat settings (keys as :attr:`Leaf.key`, or their kebab-case form).

    Settings not in ``values`` keep their defaults (from ``defaults``, else the fields' own).

    Raises:
        ValueError: a key that is no setting of ``config_type``, a value of the wrong type, a
            required setting missing, or any check of the configs themselves.
    """
    return _assemble(config_type, defaults, converted(config_type, values), ())


def converted(config_type: type, values: Mapping[str, Any]) -> dict[tuple[str, ...], Any]:
    """``values`` by their settings' paths, each converted to its type (:func:`convert`).

    Raises:
        ValueError: a key that is no setting of ``config_type``, or a value of the wrong type.
    """
    known = {leaf.key: leaf for leaf in leaves(config_type)}
    given: dict[tuple[str, ...], Any] = {}
    for key, value in values.items():
        leaf = known.get(str(key).replace("-", "_"))
        if leaf is None:
            raise ValueError(f"unknown setting {key!r}")
        given[leaf.path] = convert(leaf, value)
    return given


def convert(leaf: Leaf, value: Any) -> Any:
    """``value`` (from YAML or the command line) as the setting's type: ``"3" -> 3`` for an int.

    Raises:
        ValueError: a value that is not of the type (``"fast"`` for an int), or not a choice.
    """
    if value is None:
        if leaf.optional:
            return None
        raise ValueError(f"{leaf.key} needs a value")
    if leaf.kind is tuple:
        return _items(leaf, value)
    try:
        if leaf.kind is bool:
            if not isinstance(value, bool):
                raise TypeError
        elif leaf.kind is int and isinstance(value, float) and not value.is_integer():
            raise TypeError
        else:
            value = leaf.kind(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{leaf.key} must be {'a list' if leaf.kind is tuple else 'a ' + KIND_WORDS[leaf.kind]}; got {value!r}"
        ) from None
    if leaf.choices is not None and value not in leaf.choices:
        raise ValueError(f"{leaf.key} must be one of {', '.join(map(str, leaf.choices))}; got {value!r}")
    return value


KIND_WORDS: dict[type, str] = {int: "whole number", float: "number", str: "text", bool: "true or false"}
"""How messages and the settings reference name a setting's type (a list's items: plural)."""


def _with_article(kind: type) -> str:
    """``int -> "a whole number"``, ``bool -> "true or false"``, ``tuple -> "a list"``."""
    return "a list" if kind is tuple else KIND_WORDS[kind] if kind is bool else f"a {KIND_WORDS[kind]}"


def _items(leaf: Leaf, value: Any) -> tuple[Any, ...]:
    """A list setting's value as a tuple of its item type: ``"0.15, 0.3" -> (0.15, 0.3)`` for a
    comma-separated list of floats; ``"all"`` -> None where items may be None."""
    separator, none = leaf.declared.metadata.get("separator"), leaf.declared.metadata.get("none", "none")
    if isinstance(value, str):
        parts: list[Any] = [p.strip() for p in value.split(separator)] if separator else [value]
        parts = [p for p in parts if p]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        parts = [value]
    items: list[Any] = []
    for part in parts:
        if leaf.item_optional and (part is None or str(part).strip().lower() == none):
            items.append(None)
            continue
        try:
            if leaf.item is bool or isinstance(part, bool) or part is None:
                raise TypeError
            if leaf.item is int and isinstance(part, float) and not part.is_integer():
                raise TypeError
            items.append(leaf.item(part))
        except (TypeError, ValueError):
            words = f"{KIND_WORDS[leaf.item]}s"
            allowed = ("comma-separated " if separator == "," else "") + words + (f" or '{none}'" if leaf.item_optional else "")
            example = {int: ["100", "300"], float: ["0.1", "0.2"]}.get(leaf.item, ["a", "b"]) + [none] * leaf.item_optional
            raise ValueError(f"{leaf.key}: expected {allowed}, e.g. {(separator or ' ').join(example)}; got {value!r}") from None
    return tuple(items)


def _assemble(config_type: type, defaults: Any, given: dict[tuple[str, ...], Any], prefix: tuple[str, ...]) -> Any:
    hints = _hints(config_type)
    keywords = {}
    for f in dataclasses.fields(config_type):
        path = (*prefix, f.name)
        default = getattr(defaults, f.name) if defaults is not None else MISSING
        if dataclasses.is_dataclass(hints[f.name]):
            base = default if default is not MISSING else _nested_default(f, hints[f.name])
            keywords[f.name] = _assemble(hints[f.name], base, given, path)
        elif path in given:
            keywords[f.name] = given[path]
        elif default is not MISSING:
            keywords[f.name] = default
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"{f.metadata.get('flag') or f.name} is required")
    return config_type(**keywords)


def nested_type(config_type: type, name: str) -> type:
    """The config class of the nested field ``name`` of ``config_type``."""
    return _hints(config_type)[name]


def _nested_default(f: dataclasses.Field, nested: type) -> Any:
    """The defaults of a nested config field: None (its fields' own, read one by one) when the
    factory is the class itself, else the instance the factory makes (a study's base config
    with its own budget). Not an instance made by the class itself: its ``__post_init__`` may
    resolve what was not given (a default time limit), which would then pass for a default
    beside the settings the user gives."""
    return None if f.default_factory is nested else _field_default(f)


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


@functools.cache
def _hints(config_type: type) -> dict[str, Any]:
    return typing.get_type_hints(config_type)


def _without_none(hint: Any) -> Any:
    """``tuple[int, ...] | None -> tuple[int, ...]``."""
    if get_origin(hint) in (Union, types.UnionType):
        return next(a for a in get_args(hint) if a is not type(None))
    return hint


def _describe(hint: Any) -> tuple[type, bool, tuple[Any, ...] | None]:
    """``(kind, optional, choices)`` of a field's type: ``int | None -> (int, True, None)``."""
    optional = False
    if get_origin(hint) in (Union, types.UnionType):
        arguments = [a for a in get_args(hint) if a is not type(None)]
        optional = len(arguments) < len(get_args(hint))
        hint = arguments[0]
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        return type(choices[0]), optional, choices
    if get_origin(hint) is tuple:
        return tuple, optional, None
    return hint, optional, None


def _out_of_bounds(value: Any, metadata: Mapping[str, Any]) -> str:
    """The bounds in words (:func:`bounds`) when ``value`` breaks them, or ``""`` when it is within."""
    low = ("ge", metadata["ge"]) if metadata.get("ge") is not None else ("gt", metadata.get("gt"))
    high = ("le", metadata["le"]) if metadata.get("le") is not None else ("lt", metadata.get("lt"))
    inside = (low[1] is None or (value >= low[1] if low[0] == "ge" else value > low[1])) and (
        high[1] is None or (value <= high[1] if high[0] == "le" else value < high[1])
    )
    return "" if inside else bounds(metadata)


def bounds(metadata: Mapping[str, Any]) -> str:
    """A setting's declared bounds in words: ``"in (0, 1]"``, ``">= 1"``, ``"< 0.5"``; ``""`` for none."""
    low = ("ge", metadata["ge"]) if metadata.get("ge") is not None else ("gt", metadata.get("gt"))
    high = ("le", metadata["le"]) if metadata.get("le") is not None else ("lt", metadata.get("lt"))
    if low[1] is not None and high[1] is not None:
        return f"in {'[' if low[0] == 'ge' else '('}{low[1]:g}, {high[1]:g}{']' if high[0] == 'le' else ')'}"
    if low[1] is not None:
        return f"{'>=' if low[0] == 'ge' else '>'} {low[1]:g}"
    if high[1] is not None:
        return f"{'<=' if high[0] == 'le' else '<'} {high[1]:g}"
    return ""


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """A YAML mapping of settings (flag names as keys, in kebab or snake case), e.g. a run's ``config.yaml``.

    Raises:
        ValueError: the file cannot be read, is not YAML, or is not a mapping.
    """
    import yaml

    try:
        settings = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML ({error})") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read the config file ({error.strerror or error})") from None
    if not isinstance(settings, Mapping):
        raise ValueError(f"{path}: expected a mapping of settings, e.g. 'max-steps: 100'")
    return dict(settings)
