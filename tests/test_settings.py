"""The declarations every config is made of: bounds and choices checked, flat settings built and read back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from tokenmask.masking.config import MaskingConfig, SelectionConfig
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import bounds, build, check, flatten, leaves, setting, spelled


@dataclass(frozen=True)
class Demo:
    steps: int = setting(10, help="steps", ge=1)
    share: float = setting(0.5, help="a share", gt=0.0, le=1.0)
    mode: Literal["a", "b"] = setting("a", help="a mode", flag="kind")
    limit: int | None = setting(None, help="optional", ge=1)
    files: tuple[str, ...] = setting((), help="files", positional=True)

    def __post_init__(self) -> None:
        check(self)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"steps": 0}, r"steps must be >= 1; got 0"),
        ({"share": 0.0}, r"share must be in \(0, 1\]; got 0.0"),
        ({"share": 1.5}, r"share must be in \(0, 1\]; got 1.5"),
        ({"mode": "c"}, r"kind must be one of a, b; got 'c'"),  # named as the user knows it: by its flag
        ({"limit": 0}, r"limit must be >= 1; got 0"),
    ],
)
def test_a_value_outside_its_declaration_is_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        Demo(**changes)


def test_none_is_not_checked_against_bounds():
    assert Demo(limit=None).limit is None and Demo(limit=3).limit == 3


def test_build_converts_flat_settings_by_their_flag_names():
    # kebab or snake keys, YAML's strings and ints converted to the declared types, a string for a list
    demo = build(Demo, {"steps": "4", "kind": "b", "share": 1, "files": "a.txt"})
    assert demo == Demo(steps=4, mode="b", share=1.0, files=("a.txt",))
    with pytest.raises(ValueError, match="unknown setting 'mode'"):  # the field's own name is not its flag
        build(Demo, {"mode": "b"})
    with pytest.raises(ValueError, match="steps must be a whole number; got 2.5"):
        build(Demo, {"steps": 2.5})
    with pytest.raises(ValueError, match="kind must be one of a, b; got 'z'"):
        build(Demo, {"kind": "z"})


@pytest.mark.parametrize("config_type", [PretrainConfig, FinetuneConfig, MaskingConfig])
def test_flatten_and_build_round_trip_every_setting(config_type):
    config = config_type()
    flat = flatten(config)
    assert len(flat) == len(list(leaves(config_type)))  # every key is one setting: no two share a name
    assert build(config_type, flat) == config


def test_nested_settings_reach_their_config():
    config = build(PretrainConfig, {"max-steps": 5, "selection": "exact", "corrupt_per_unit": True, "document-boundary": "line"})
    assert config.loop.max_steps == 5 and config.loop.max_time is None  # a limit given: no default time limit
    assert config.masking.selection == SelectionConfig(mode="exact")
    assert config.masking.corruption.per_unit and config.reading.document_boundary == "line"


def test_one_limit_rule_for_both_recipes():
    # no limit at all: 9 minutes; any limit given (epochs included): only that one
    assert PretrainConfig().loop.max_time == 9.0 and FinetuneConfig().loop.max_time == 9.0
    assert build(PretrainConfig, {"max_steps": 20000}).loop.max_time is None
    assert build(FinetuneConfig, {"epochs": 2}).loop.max_time is None
    assert build(FinetuneConfig, {"max_tokens": 10}).loop.max_time is None


def test_fine_tuning_has_its_own_loop_defaults():
    assert (FinetuneConfig().loop.lr, FinetuneConfig().loop.batch_size) == (1e-4, 32)
    assert (PretrainConfig().loop.lr, PretrainConfig().loop.batch_size) == (2e-3, 8)


@dataclass(frozen=True)
class Lists:
    name: str = setting(help="required: no default")
    rates: tuple[float, ...] = setting((0.15, 0.3), help="rates", separator=",")
    sizes: tuple[int | None, ...] = setting((None,), help="sizes", separator=",", none="all")
    keep: bool = setting(True, help="keep")


@dataclass(frozen=True)
class Outer:
    lists: Lists = setting(help="the lists", exclude=("keep",), reword={"rates": "the outer rates"})
    loop_seed: int = setting(0, help="seed", ge=0)
    demo: Demo = setting(factory=Demo, help="the demo", only=("steps",))


def test_lists_are_read_from_words_and_yaml_lists_and_spelled_back():
    # "100, all" (one command-line word, comma-separated) and [100, null] (YAML) give the same tuple
    assert build(Lists, {"name": "x", "rates": "0.1, 0.2", "sizes": "100,all"}) == Lists("x", (0.1, 0.2), (100, None))
    assert build(Lists, {"name": "x", "sizes": [100, None]}).sizes == (100, None)
    assert flatten(Lists("x")) == {"name": "x", "rates": [0.15, 0.3], "sizes": [None], "keep": True}
    rates, sizes = (leaf for leaf in leaves(Lists) if leaf.key in ("rates", "sizes"))
    assert (spelled(rates, (0.15, 0.3)), spelled(sizes, (None, 100))) == ("0.15,0.3", "all,100")
    for bad, message in (("0,x", "rates: expected comma-separated numbers, e.g. 0.1,0.2; got '0,x'"),):
        with pytest.raises(ValueError, match=message):
            build(Lists, {"name": "x", "rates": bad})
    with pytest.raises(ValueError, match=r"sizes: expected comma-separated whole numbers or 'all', e\.g\. 100,300,all"):
        build(Lists, {"name": "x", "sizes": "10,1.5"})


def test_an_advanced_setting_is_declared_read_and_written_as_any_other():
    # `advanced` only decides what a long command's --help shows (tests/cli/test_flags.py)
    @dataclass(frozen=True)
    class Tuned:
        steps: int = setting(10, help="steps", ge=1)
        warmup: int = setting(0, help="warm-up steps", ge=0, advanced=True)

        def __post_init__(self) -> None:
            check(self)

    assert [(leaf.key, leaf.advanced) for leaf in leaves(Tuned)] == [("steps", False), ("warmup", True)]
    assert build(Tuned, {"warmup": "3"}) == Tuned(warmup=3) and flatten(Tuned(warmup=3)) == {"steps": 10, "warmup": 3}
    with pytest.raises(ValueError, match="warmup must be >= 0; got -1"):
        build(Tuned, {"warmup": -1})


def test_a_required_setting_is_asked_for_by_name():
    assert [leaf.key for leaf in leaves(Lists) if leaf.required] == ["name"]
    with pytest.raises(ValueError, match="name is required"):
        build(Lists, {"rates": "0.1"})


def test_a_nested_config_offers_only_what_its_field_declares_in_the_words_it_gives():
    keys = {leaf.key: leaf for leaf in leaves(Outer)}
    assert list(keys) == ["name", "rates", "sizes", "loop_seed", "steps"]  # keep excluded; only steps of Demo
    assert keys["rates"].help == "the outer rates" and keys["sizes"].help == "sizes"
    built = build(Outer, {"name": "n", "rates": "0.5", "steps": 3})
    assert (built.lists.rates, built.lists.keep, built.demo.steps, built.demo.share) == ((0.5,), True, 3, 0.5)
    with pytest.raises(ValueError, match="unknown setting 'keep'"):
        build(Outer, {"name": "n", "keep": False})
    with pytest.raises(ValueError, match="unknown setting 'share'"):
        build(Outer, {"name": "n", "share": 0.1})
    assert "keep" not in flatten(built) and "share" not in flatten(built)


def test_a_nested_default_is_its_fields_own_not_what_the_class_resolves():
    # FinetuneConfig resolves a 9-minute limit when none is given; as a nested default, that
    # would ride along beside a limit the user gives (runs of --max-steps 60 cut at 9 min)
    @dataclass(frozen=True)
    class Runs:
        base: FinetuneConfig = setting(factory=FinetuneConfig, help="every run")

    assert build(Runs, {"max_steps": 60}).base.loop.max_time is None
    assert {leaf.key: leaf.default for leaf in leaves(Runs)}["max_time"] is None
    assert build(FinetuneConfig, {}).loop.max_time == 9.0  # alone, the default limit still applies


def test_bounds_in_words():
    assert [bounds(leaf.declared.metadata) for leaf in leaves(Demo)] == [">= 1", "in (0, 1]", "", ">= 1", ""]
