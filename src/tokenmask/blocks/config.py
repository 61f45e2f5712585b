"""How a corpus becomes blocks: their length, the held-out share, the block cache (and the processes that
encode into it) or the stream."""

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
    cache_dir: str | None = setting(
        None, help="block cache folder (none = $TOKENMASK_CACHE or ~/.cache/tokenmask)", advanced=True
    )
    no_cache: bool = setting(False, help="encode the corpus afresh, without reading or writing the block cache", advanced=True)
    streaming: bool = setting(
        False,
        help="pack blocks on the fly as the corpus is read, in its order, shuffled within chunks: no pre-pass and no block "
        "cache (for corpora too large to encode first, and hf: datasets); resumes exactly on as many processes",
    )
    chunk_characters: int = setting(
        1 << 20,
        help="--streaming: characters of text packed and shuffled together (a chunk); DataLoader workers take chunks in turn",
        ge=1,
        advanced=True,
    )
    num_proc: int | None = setting(
        None,
        help="processes that encode the corpus into the cache (none = one per core; 1 = this process); "
        "the blocks are the same whatever the number",
        ge=1,
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)
