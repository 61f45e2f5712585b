"""How a corpus becomes blocks: their length, the held-out share, the block cache."""

from __future__ import annotations

from dataclasses import dataclass

from tokenmask.settings import check, setting

DEFAULT_VALIDATION_SHARE = 0.02


@dataclass(frozen=True)
class BlocksConfig:
    """The settings of :func:`~tokenmask.blocks.build.load_blocks`, declared once for ``pretrain`` and ``evaluate``."""

    max_length: int = setting(128, help="block length in tokens, special tokens included", ge=8)
    validation_share: float = setting(
        DEFAULT_VALIDATION_SHARE, help="share of documents held out for validation (by a hash of each text)", gt=0.0, lt=0.5
    )
    cache_dir: str | None = setting(None, help="block cache folder (none = $TOKENMASK_CACHE or ~/.cache/tokenmask)")
    no_cache: bool = setting(False, help="encode the corpus afresh, without reading or writing the block cache")

    def __post_init__(self) -> None:
        check(self)
