"""The options of the command line itself, declared like every setting: how results print, replay files, the demo.

They belong to no library config (a Python caller has no use for ``--json``), so they are
declared here, with :func:`tokenmask.settings.setting` as every other flag: ``--help`` and the
settings reference list them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenmask.settings import check, setting


@dataclass(frozen=True)
class JsonOutput:
    json: bool = setting(False, help="print JSON instead of tables and text")


@dataclass(frozen=True)
class ShownRows:
    show: int = setting(25, help="rows of the table printed (the file written and --json hold every one)", ge=1)

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class ReplayFile:
    config: str | None = setting(
        None,
        metavar="YAML",
        help="YAML file of settings (flag names as keys, e.g. a run's OUTPUT/config.yaml); flags override it",
    )


@dataclass(frozen=True)
class Demo:
    no_demo: bool = setting(False, help="skip the fill-mask demo at the end")
