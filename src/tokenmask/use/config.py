"""Settings of what uses a model or the masking without training: one frozen dataclass per command.

``tokenmask mask``, ``stats``, ``pmi``, ``evaluate``, ``fill``, ``answer``, ``embed``, ``search`` and
``tokenizer train`` each build one of these and make one library call with it (``terms`` builds
:class:`~tokenmask.text.terms.TermsConfig`, declared with its job and imported here); their flags,
``--help`` and the settings reference come from these declarations
(:func:`tokenmask.settings.setting`), and the settings they share are the stages' own
(masking, reading, blocks) nested here, not declared again. Importing this module imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenmask.blocks.config import BlocksConfig
from tokenmask.hub import HubConfig
from tokenmask.masking.config import MaskingConfig, UnitConfig
from tokenmask.settings import check, setting
from tokenmask.text.config import DEFAULT_TOKENIZER, ReadingConfig
from tokenmask.text.terms import TermsConfig as TermsConfig  # declared with its job; the command line reads it here

TOKENIZER_NAMES = "bert-base-uncased, roberta-gpt2, minilm"
"""The built-in tokenizer names (:func:`tokenmask.text.tokenizer.load_tokenizer`)."""

MODEL_HELP = "a folder (e.g. OUTPUT/model of pretrain), minilm, or a Hub id ORG/NAME (through the Hugging Face cache)"

TEXTS_HELP = "files, folders or globs: one text per line of .txt/.md, the --text-field of .jsonl/.csv/.parquet records"
_SEED_HELP = "random seed of the masks"


@dataclass(frozen=True)
class TokenizerChoice:
    """The tokenizer of a command that masks without a model."""

    tokenizer: str | None = setting(
        None,
        help=f"tokenizer folder, built-in name ({TOKENIZER_NAMES}; these win over Hub repositories of the same name) "
        f"or Hub id ORG/NAME (default: {DEFAULT_TOKENIZER})",
    )

    @property
    def name(self) -> str:
        """The tokenizer given, or :data:`~tokenmask.text.config.DEFAULT_TOKENIZER`."""
        return self.tokenizer or DEFAULT_TOKENIZER


@dataclass(frozen=True)
class MaskPreviewConfig:
    """Which texts to mask, and how (``tokenmask mask``: :func:`tokenmask.use.preview.preview_masking`).

    Raises:
        ValueError: both ``text`` and ``file``, or a setting out of range.
    """

    text: tuple[str, ...] = setting(
        (), positional=True, metavar="TEXT", help="text to mask (none: --file, or a few bundled lines of Shakespeare)"
    )
    file: str | None = setting(None, help="mask each line of this file (.txt/.md/.jsonl)")
    tokenizer: TokenizerChoice = setting(factory=TokenizerChoice, help="tokenizer")
    seed: int = setting(0, help=_SEED_HELP, ge=0)
    blocks: BlocksConfig = setting(
        factory=BlocksConfig,
        help="length",
        only=("max_length",),
        reword={"max_length": "truncate each text to this many tokens, special tokens included"},
    )
    masking: MaskingConfig = setting(factory=MaskingConfig, help="masking")

    def __post_init__(self) -> None:
        check(self)
        if self.text and self.file:
            raise ValueError("give TEXT or --file, not both")


@dataclass(frozen=True)
class AuditConfig:
    """Which corpus to mask and measure, how much of it, with which masking (``tokenmask stats``:
    :func:`tokenmask.use.audit.audit_corpus`)."""

    corpus: tuple[str, ...] = setting(
        (), positional=True, help="files, folders or globs (.txt/.md: one text per line; .jsonl: --text-field); none = the "
        "bundled Shakespeare plays, one document per scene",
    )  # fmt: skip
    pack: bool = setting(
        True,
        help="pack texts into full blocks as in pre-training; --no-pack masks each text alone, truncated to --max-length",
    )
    batch_size: int = setting(256, help="examples per batch", ge=1)
    max_tokens: int = setting(200_000, help="stop after this many tokens", ge=1)
    tokenizer: TokenizerChoice = setting(factory=TokenizerChoice, help="tokenizer")
    seed: int = setting(0, help=_SEED_HELP, ge=0)
    reading: ReadingConfig = setting(factory=ReadingConfig, help="reading", only=("text_field",))
    blocks: BlocksConfig = setting(factory=BlocksConfig, help="blocks", only=("max_length",))
    masking: MaskingConfig = setting(factory=MaskingConfig, help="masking")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class PmiTableConfig:
    """Which corpus's PMI vocabulary to build, and how (``tokenmask pmi``: :func:`tokenmask.use.preview.pmi_table`)."""

    corpus: tuple[str, ...] = setting(
        (), positional=True, help="files, folders or globs (.txt/.md: --document-boundary; .jsonl: --text-field); none = the "
        "bundled Shakespeare plays, one document per scene, as pretrain reads them",
    )  # fmt: skip
    top: int = setting(20, help="n-grams shown per n, best first", ge=1)
    tokenizer: TokenizerChoice = setting(factory=TokenizerChoice, help="tokenizer")
    units: UnitConfig = setting(factory=UnitConfig, help="vocabulary", only=("pmi_min_count", "pmi_vocab_size"))
    reading: ReadingConfig = setting(factory=ReadingConfig, help="reading")
    blocks: BlocksConfig = setting(factory=BlocksConfig, help="cache", only=("cache_dir", "no_cache"))

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class EvaluateConfig:
    """Which checkpoint to score on which blocks, at which masks (``tokenmask evaluate``:
    :func:`tokenmask.use.evaluate.evaluate_checkpoint`). The blocks (and their split) are those
    a pre-training run with the same corpus and settings uses."""

    model: str = setting(positional=True, help=f"checkpoint: {MODEL_HELP}")
    corpus: tuple[str, ...] = setting(
        (), positional=True, help="files, folders or globs, evaluated whole (their first blocks); none = the held-out "
        "documents of the bundled Shakespeare",
    )  # fmt: skip
    max_blocks: int = setting(512, help="evaluate on at most this many blocks", ge=1)
    pseudo_perplexity: bool = setting(
        False, help="also score each non-special token masked alone (one forward pass per token; see --max-tokens)"
    )
    max_tokens: int = setting(
        2048, help="with --pseudo-perplexity: score at most this many tokens, the first of the first blocks", ge=1
    )
    tokenizer: str | None = setting(
        None,
        help=f"tokenizer folder, built-in name ({TOKENIZER_NAMES}; these win over Hub repositories of the same name) or "
        "Hub id (default: the model's own); it must have the model's vocabulary",
    )
    seed: int = setting(0, help=_SEED_HELP, ge=0)
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")
    reading: ReadingConfig = setting(factory=ReadingConfig, help="reading")
    blocks: BlocksConfig = setting(factory=BlocksConfig, help="blocks")
    masking: MaskingConfig = setting(factory=MaskingConfig, help="masking")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class FillConfig:
    """Which checkpoint fills which text (``tokenmask fill``: :func:`tokenmask.use.fill.predict_masks`)."""

    model: str = setting(positional=True, help=f"masked-LM checkpoint: {MODEL_HELP}")
    text: tuple[str, ...] = setting(positional=True, help="text with [MASK] or <mask>")
    top_k: int = setting(5, help="predictions per mask", ge=1)
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class AnswerConfig:
    """Which question-answering checkpoint answers which question from which context
    (``tokenmask answer``: :func:`tokenmask.use.answers.answer_question`)."""

    model: str = setting(positional=True, help=f"question-answering checkpoint (finetune --task qa): {MODEL_HELP}")
    question: str = setting(help="the question")
    context: str = setting(help="the text that holds the answer")
    max_length: int = setting(384, help="tokens per window; a longer context is cut into windows", ge=8)
    doc_stride: int = setting(128, help="tokens that consecutive windows share", ge=0)
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class EncoderConfig:
    """The model and how texts reach it: what ``embed`` and ``search`` share (they must agree)."""

    model: str = setting(
        positional=True,
        metavar="MODEL",
        help=f"encoder or masked-LM checkpoint: {MODEL_HELP}",
    )
    hub: HubConfig = setting(factory=HubConfig, help="the Hub")
    text_field: str = setting("text", help="text field / column of JSON, CSV, Parquet records")
    max_length: int = setting(256, help="tokens per text at most, special tokens included; longer texts are cut", ge=1)

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class EmbedConfig:
    """Which texts to embed into which file (``tokenmask embed``: :func:`tokenmask.use.embed.embed_corpus`)."""

    encoder: EncoderConfig = setting(help="the encoder")
    input: tuple[str, ...] = setting(metavar="FILE", help=TEXTS_HELP)
    output: str = setting(help="the .npy file to write (exactly this name)")
    batch_size: int = setting(32, help="texts per forward pass; texts are sorted by length so batches pad little", ge=1)
    normalize: bool = setting(
        True,
        help="scale each vector to unit L2 norm, so a dot product is the cosine similarity, as retrieval and vector "
        "stores expect; --no-normalize keeps the plain means",
    )

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class SearchConfig:
    """Which index to search for which query (``tokenmask search``: :func:`tokenmask.use.embed.search_corpus`)."""

    encoder: EncoderConfig = setting(help="the encoder")
    index: str = setting(help="the .npy file written by `tokenmask embed`")
    texts: tuple[str, ...] = setting(metavar="FILE", help=f"the input of `embed`: {TEXTS_HELP}")
    query: str = setting(help="the text to look for")
    top_k: int = setting(5, help="results to show", ge=1)

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class TokenizerTrainingConfig:
    """Which tokenizer to train on which corpus, saved where (``tokenmask tokenizer train``:
    :func:`tokenmask.use.tokenizer_training.train_tokenizer_folder`)."""

    output: str = setting(help="folder to save the tokenizer in")
    corpus: tuple[str, ...] = setting(
        (), positional=True, help="files, folders or globs (.txt/.md: one text per line; .jsonl); none = the bundled Shakespeare"
    )
    kind: Literal["wordpiece", "bpe", "unigram"] = setting("wordpiece", help="model")
    vocab_size: int = setting(8000, help="vocabulary size", ge=50)

    def __post_init__(self) -> None:
        check(self)
