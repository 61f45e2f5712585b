"""The declarations every config is made of: bounds and choices checked, flat settings built and read back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from tokenmask.masking.config import MaskingConfig, SelectionConfig
from tokenmask.recipes.config import FinetuneConfig, PretrainConfig
from tokenmask.settings import build, check, flatten, leaves, setting


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
