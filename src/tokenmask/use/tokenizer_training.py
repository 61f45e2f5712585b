"""A new tokenizer from a corpus, saved as a Hugging Face folder (``tokenmask tokenizer train``).

WordPiece, byte-level BPE or Unigram with ``[CLS]``/``[SEP]``/``[MASK]`` special tokens
(:func:`tokenmask.text.tokenizer.train_tokenizer`), trained on files or on the bundled
Shakespeare, one text per line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenmask.use.config import TokenizerTrainingConfig

SAMPLE = "Shall I compare thee to a summer's day?"
"""A line every new tokenizer is shown on."""


@dataclass(frozen=True)
class TrainedTokenizer:
    """Where the tokenizer went, its size, and how it cuts :data:`SAMPLE`."""

    output: Path
    size: int
    sample_tokens: list[str]


def train_tokenizer_folder(config: TokenizerTrainingConfig) -> TrainedTokenizer:
    """Train the tokenizer ``config`` asks for and save it to ``config.output`` (created if missing).

    Raises:
        ValueError / OSError: an unreadable corpus, or an output folder that cannot be written.
    """
    from tokenmask.text.corpus import read_texts
    from tokenmask.text.resources import shakespeare_lines
    from tokenmask.text.tokenizer import train_tokenizer

    texts = read_texts(config.corpus) if config.corpus else iter(shakespeare_lines())
    tokenizer = train_tokenizer(texts, kind=config.kind, vocab_size=config.vocab_size)
    output = Path(config.output)
    output.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(output)
    return TrainedTokenizer(output, len(tokenizer), tokenizer.tokenize(SAMPLE))
