"""Domain terms: the score worked by hand, planted terms found first, common words low, the bundled
plays' archaic forms and names, the terms file read back, a background corpus, bad input."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from tokenmask.text.collocations import default_min_count
from tokenmask.text.config import ReadingConfig
from tokenmask.text.phrases import read_terms
from tokenmask.text.terms import Term, TermsConfig, corpus_words, find_terms

PLANTED_WORDS = ("zorblax", "quintessor", "flumbrix")  # invented: wordfreq has never seen them
PLANTED = {(word,) for word in PLANTED_WORDS} | {("quantum", "flux")}
SENTENCES = 2500
LINES = ReadingConfig(document_boundary="line")


def common_english(rng: random.Random, count: int) -> list[str]:
    """``count`` words drawn from wordfreq's 1,000 most frequent English words, each in
    proportion to its frequency: the corpus uses them as English does, up to one factor (their
    shares sum to 0.63, so each is 1 / 0.63 = 1.6 times as frequent here: a score of about 0.7)."""
    from wordfreq import top_n_list, word_frequency

    words = [w for w in top_n_list("en", 1000) if w.isalpha() and len(w) > 1]
    return rng.choices(words, weights=[word_frequency(w, "en") for w in words], k=count)


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    """2,500 lines of 12 common words (30,000 words, so min_count 3), and planted in them: each
    invented word on 40 lines, "quantum flux" on 40 (its words nowhere else), "rarissimo" twice."""
    rng = random.Random(0)
    lines = [common_english(rng, 12) for _ in range(SENTENCES)]
    for planted in [*PLANTED_WORDS, "quantum flux"]:
        for line in rng.sample(lines, 40):
            line.insert(rng.randrange(len(line) + 1), planted)
    for line in lines[:2]:
        line.append("rarissimo")
    path = tmp_path_factory.mktemp("domain") / "domain.txt"
    path.write_text("".join(" ".join(line) + ".\n" for line in lines), encoding="utf-8")
    return path


def terms_of(path, **settings) -> dict[tuple[str, ...], Term]:
    table = find_terms(TermsConfig(corpus=(str(path),), reading=LINES, **settings))
    return {entry.words: entry for entry in table.entries}


def test_words_are_lower_cased_without_possessives_and_punctuation_stands_alone():
    assert corpus_words("O'er Falstaff's well-beloved X-ray, 2 men.") == [
        "o'er", "falstaff", "well-beloved", "x-ray", ",", "2", "men", ".",
    ]  # fmt: skip
    assert corpus_words("’Tis Hamlet’s") == ["'", "tis", "hamlet"]  # curly apostrophes read as straight ones


def test_the_score_by_hand(tmp_path):
    # corpus: zorblax 3, cat 2, dog 1 -> 6 words; background: cat 25, dog 3, the 72 -> 100 words
    (tmp_path / "domain.txt").write_text("zorblax zorblax zorblax cat cat dog\n", encoding="utf-8")
    (tmp_path / "background.txt").write_text("cat " * 25 + "dog " * 3 + "the " * 72 + "\n", encoding="utf-8")
    config = TermsConfig(
        corpus=(str(tmp_path / "domain.txt"),), background=str(tmp_path / "background.txt"), min_count=2, min_score=0, max_words=1
    )
    table = find_terms(config)
    assert (table.words, table.min_count, table.background_words) == (6, 2, 100)
    zorblax, cat = table.entries  # dog: once, under min_count 2
    # zorblax: 3 / 6 = 500,000 per million; never in the background, so counted there as seen once,
    # 1 / 100 = 10,000 per million: log2((500,000 + 1) / (10,000 + 1)) = 5.644
    assert (zorblax.words, zorblax.count, zorblax.background_per_million) == (("zorblax",), 3, 0.0)
    assert zorblax.per_million == pytest.approx(500_000)
    assert zorblax.score == pytest.approx(math.log2(500_001 / 10_001)) == pytest.approx(5.644, abs=1e-3)
    # cat: 2 / 6 = 333,333.3 per million here, 25 / 100 = 250,000 there: log2(333,334.3 / 250,001) = 0.415
    assert cat.per_million == pytest.approx(1e6 / 3) and cat.background_per_million == pytest.approx(250_000)
    assert cat.score == pytest.approx(math.log2((1e6 / 3 + 1) / 250_001)) == pytest.approx(0.415, abs=1e-3)
    # min_score 1 (twice as frequent): cat goes; a smoothing of 1e6 pulls every score towards 0
    assert [e.words for e in find_terms(replace(config, min_score=1.0)).entries] == [("zorblax",)]
    smoothed = find_terms(replace(config, smoothing=1e6)).entries[0]
    assert smoothed.score == pytest.approx(math.log2(1.5e6 / 1.01e6))


def test_planted_terms_rank_first(domain):
    table = find_terms(TermsConfig(corpus=(str(domain),), reading=LINES))
    # 30,000 drawn words, 3 x 40 invented, 40 x "quantum flux", 2 x rarissimo; with the 2,500 full
    # stops, 32,702 tokens: min_count max(3, round(0.33)) = 3
    assert table.words == 2500 * 12 + 3 * 40 + 2 * 40 + 2 and table.min_count == 3 == default_min_count(32_702)
    # the four planted terms are the top 4, exactly: the invented words first (40 in 30,202 words
    # is 1,324 per million, never in the background: log2(1,325 / 1) = 10.4), then "quantum flux"
    # (wordfreq: 2.8 per million, log2(1,325 / 3.8) = 8.4), ahead of "flux" (3.7, 8.1): at the
    # same count the phrase outranks its rarest word. The best common word scores far lower.
    top = [entry.words for entry in table.entries]
    assert set(top[:3]) == {(word,) for word in PLANTED_WORDS} and top[3] == ("quantum", "flux")
    assert [round(e.score, 1) for e in table.entries[:4]] == [10.4, 10.4, 10.4, 8.4]
    assert top.index(("quantum", "flux")) < top.index(("flux",)) < top.index(("quantum",))
    assert all(entry.count >= 3 and entry.score >= 1 for entry in table.entries)
    assert [e.score for e in table.entries] == sorted((e.score for e in table.entries), reverse=True)


def test_common_words_score_low(domain):
    everything = terms_of(domain, min_score=0, top=100_000)
    planted = min(everything[term].score for term in PLANTED)
    common = [entry for words, entry in everything.items() if words not in PLANTED and words[0] not in ("quantum", "flux")]
    assert len(common) > 100 and max(entry.score for entry in common) < planted - 5
    # as frequent as in English but for the factor 1.6 of the draw: about log2(1.6) = 0.7, under 1
    for word in ("the", "of", "and", "to", "that", "you", "with", "this"):
        assert everything[(word,)].score == pytest.approx(0.7, abs=0.2), word
    kept = terms_of(domain)
    assert not {("the",), ("of",), ("and",), ("to",)} & set(kept)  # min_score 1: not terms at all


def test_min_count_keeps_out_what_is_too_rare(domain):
    assert ("rarissimo",) not in terms_of(domain)  # twice, under 3
    rarer = terms_of(domain, min_count=2)
    assert ("rarissimo",) in rarer and all(entry.count >= 2 for entry in rarer.values())
    # 41: the planted terms (40 each) go; what is left occurs 41 times or more, and scores low
    frequent = terms_of(domain, min_count=41, min_score=0)
    assert not PLANTED & set(frequent) and min(entry.count for entry in frequent.values()) >= 41


def test_max_words_and_top(domain):
    assert all(len(words) == 1 for words in terms_of(domain, max_words=1))
    assert ("quantum", "flux") not in terms_of(domain, max_words=1)
    top2 = find_terms(TermsConfig(corpus=(str(domain),), reading=LINES, top=2)).entries
    assert len(top2) == 2 and {e.words for e in top2} <= PLANTED


def test_a_background_corpus_replaces_wordfreq(domain, tmp_path):
    # a background where zorblax is everywhere and "quantum flux" common: both stop being terms;
    # the other planted words, which it lacks, stay
    rng = random.Random(1)
    lines = [" ".join([*common_english(rng, 10), "zorblax", "quantum flux"]) for _ in range(3000)]
    background = tmp_path / "background.txt"
    background.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = find_terms(TermsConfig(corpus=(str(domain),), reading=LINES, background=str(background)))
    assert table.background == str(background) and table.background_words == 3000 * 13
    found = {entry.words: entry for entry in table.entries}
    assert ("zorblax",) not in found and ("quantum", "flux") not in found
    assert set(list(found)[:2]) == {("quintessor",), ("flumbrix",)}
    # quintessor: 40 in 30,202 words here, never there: counted as once in 39,000 words
    assert found[("quintessor",)].background_per_million == 0.0
    assert found[("quintessor",)].score == pytest.approx(math.log2((40 / 30_202 * 1e6 + 1) / (1e6 / 39_000 + 1)))


def test_the_bundled_plays_give_archaic_forms_and_names(plays_file):
    # the first 5,000 spoken lines: A Midsummer Night's Dream and most of As You Like It
    table = find_terms(TermsConfig(corpus=(str(plays_file(5000)),), top=50))
    top = {" ".join(entry.words) for entry in table.entries}
    archaic = {
        "thou", "thee", "thy", "thine", "thyself", "hath", "doth", "hast", "dost", "didst", "wilt", "shalt", "canst",
        "wouldst", "wast", "wert", "tis", "twas", "is't", "ere", "nay", "ay", "prithee", "hither", "thither", "whither",
        "withal", "troth", "methinks", "methought", "alack", "fie", "sirrah", "anon", "forsooth", "mounsieur", "lanthorn",
        "eyne", "perforce", "adieu",
    }  # fmt: skip
    names = {
        "hermia", "lysander", "demetrius", "helena", "theseus", "hippolyta", "egeus", "oberon", "titania", "puck",
        "pyramus", "thisby", "thisbe", "quince", "peter quince", "bottom", "snout", "snug", "starveling", "cobweb",
        "mustardseed", "peaseblossom", "athenian", "rosalind", "celia", "orlando", "oliver", "jaques", "touchstone",
        "corin", "silvius", "phebe", "audrey", "ganymede", "aliena",
    }  # fmt: skip
    assert len(top & (archaic | names)) >= 30, sorted(top - archaic - names)
    assert not top & {"the", "and", "you", "my", "not", "with", "is", "of"}


def test_the_terms_file_is_what_read_terms_reads(domain, tmp_path, bert_tokenizer):
    table = find_terms(TermsConfig(corpus=(str(domain),), reading=LINES, top=20))
    path = table.write(tmp_path / "out" / "terms.txt")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [entry.text for entry in table.entries] and "quantum flux" in lines
    assert read_terms(path, bert_tokenizer)[:4] == tuple(entry.words for entry in table.entries[:4])
    assert not list(path.parent.glob(".*partial*"))  # written atomically: no temporary file left


@pytest.mark.usefixtures("datasets_quiet")
def test_a_hub_layout_corpus_reads_as_the_same_files(domain, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    texts = [line for line in domain.read_text(encoding="utf-8").splitlines() if line]
    pq.write_table(pa.table({"text": texts}), tmp_path / "data" / "train-00000-of-00001.parquet")
    from_hub = find_terms(TermsConfig(corpus=(f"hf:{tmp_path}",), top=20))
    assert from_hub == find_terms(TermsConfig(corpus=(str(domain),), reading=LINES, top=20))


def test_progress_counts_the_documents(domain):
    seen = []
    find_terms(
        TermsConfig(corpus=(str(domain),), reading=LINES, max_words=1), progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(1000, None), (2000, None), (SENTENCES, None)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"top": 0}, "top must be >= 1; got 0"),
        ({"min_count": 1}, "min_count must be >= 2; got 1"),
        ({"max_words": 4}, r"max_words must be in \[1, 3\]; got 4"),
        ({"smoothing": 0.0}, "smoothing must be > 0; got 0.0"),
        ({"min_score": -1.0}, "min_score must be >= 0; got -1.0"),
        ({"output": " "}, "output must name a file"),
        ({"background": ""}, "background must name a corpus"),
    ],
)
def test_settings_out_of_range_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        TermsConfig(**settings)


def test_output_must_not_be_a_folder_nor_an_input(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("zorblax\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is a folder"):
        TermsConfig(output=str(tmp_path))
    with pytest.raises(ValueError, match="is a file of the corpus or the background"):
        TermsConfig(corpus=(str(corpus),), output=str(corpus))


def test_bad_corpora_are_named(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    (tmp_path / "numbers.txt").write_text("1 2 3 4, 5 6!\n" * 50, encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "domain.txt").write_text("zorblax glorp " * 50 + "\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="no such file, folder or matching pattern"):
        find_terms(TermsConfig(corpus=(str(tmp_path / "missing.txt"),)))
    with pytest.raises(ValueError, match="holds no words"):
        find_terms(TermsConfig(corpus=(str(tmp_path / "empty.txt"),)))
    with pytest.raises(ValueError, match="no word or phrase of the corpus .* occurs 3 times or more"):
        find_terms(TermsConfig(corpus=(str(tmp_path / "numbers.txt"),)))  # numbers are no terms
    domain = (str(tmp_path / "domain.txt"),)
    with pytest.raises(ValueError, match="the background corpus: .*missing.txt: no such file"):
        find_terms(TermsConfig(corpus=domain, background=str(tmp_path / "missing.txt")))
    with pytest.raises(ValueError, match="the background corpus: .*looks binary"):
        find_terms(TermsConfig(corpus=domain, background=str(tmp_path / "binary.txt")))
    with pytest.raises(ValueError, match="the background corpus .*empty.txt holds no words"):
        find_terms(TermsConfig(corpus=domain, background=str(tmp_path / "empty.txt")))
    with pytest.raises(ValueError, match="none scores 30 or more"):
        find_terms(TermsConfig(corpus=domain, min_score=30))
