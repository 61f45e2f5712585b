"""Retrieval end to end on a tiny model and SQuAD pairs: batches without repeated positives, the loss against
sentence-transformers', the scores against their evaluator, BM25, the saved model in embed and search."""

import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tokenmask.cli.main import main
from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.labelled.pairs import Pair, RetrievalSet, retrieval_set, squad_retrieval
from tokenmask.labelled.questions import read_questions, squad_file
from tokenmask.labelled.sampler import DistinctBatches
from tokenmask.recipes.config import FinetuneConfig
from tokenmask.recipes.retrieval import collate_pairs, load_retrieval_data
from tokenmask.settings import build
from tokenmask.train.classifier import contrastive_loss_sum, load_classifier
from tokenmask.use.embed import embed_texts, load_encoder
from tokenmask.use.retrieval import bm25_scores, evaluate_retrieval, ranking_scores, top_rows

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from sentence_transformers.util import cos_sim


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    """200 SQuAD train questions and their paragraphs (about 40), as JSON lines; the first 20 with a hard negative."""
    questions = read_questions(squad_file("train"))[:200]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i, q in enumerate(questions):
            row = {"query": q.question, "positive": q.context}
            if i < 20:
                row["negative"] = questions[-1 - i].context
            handle.write(json.dumps(row) + "\n")
    return path


def test_ranking_scores_on_a_worked_case():
    top = np.array([[3, 1, 4, 5, 6, 7, 8, 9, 10, 11], [0, 2, 4, 6, 7, 8, 9, 10, 11, 12], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]])
    # ranks 2, not found, 10: recall@1 0, @5 1/3, @10 2/3; MRR (1/2 + 0 + 1/10) / 3 = 0.2; nDCG (1/log2 3 + 1/log2 11) / 3
    scores = ranking_scores(top, [1, 5, 0])
    assert scores["recall@1"] == 0 and scores["recall@5"] == pytest.approx(1 / 3) and scores["recall@10"] == pytest.approx(2 / 3)
    assert scores["mrr@10"] == pytest.approx(0.2)
    assert scores["ndcg@10"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(11)) / 3)


def test_the_squad_dev_set_is_its_questions_over_its_paragraphs():
    held_out = squad_retrieval()
    assert (len(held_out.queries), len(held_out.corpus)) == (10_570, 2_067)
    dev = read_questions(squad_file("dev"))
    assert all(held_out.corpus[r] == q.context for r, q in zip(held_out.relevant[::97], dev[::97]))
    assert retrieval_set([Pair("q1", "a"), Pair("q2", "b", "c"), Pair("q3", "a")]) == RetrievalSet(
        ["q1", "q2", "q3"], ["a", "b", "c"], [0, 1, 0]
    )


def test_batches_repeat_no_positive_while_the_epoch_has_others():
    keys = [i // 5 for i in range(200)]  # 40 texts, 5 queries each, like SQuAD's paragraphs
    sampler = DistinctBatches(keys, 16, seed=1)
    batches = sampler.batches()
    assert len(batches) == len(sampler) == 13 and sorted(i for b in batches for i in b) == list(range(200))
    assert all(len({keys[i] for i in b}) == len(b) for b in batches[:-2])  # the last ones may have no choice left
    assert sampler.batches() == batches
    sampler.set_epoch(1)
    assert sampler.batches() != batches


def test_our_loss_is_multiple_negatives_ranking_loss(pairs_file, tiny_mlm_folder, bert_tokenizer):
    """The mean of our summed InfoNCE over the queries equals sentence-transformers' loss on the same batch (no duplicate positives)."""
    config = build(FinetuneConfig, {"data": (str(pairs_file),), "task": "retrieval", "max_length": 64})
    data = load_retrieval_data(config, bert_tokenizer)
    chosen = [f for i, f in enumerate(data.train) if i % 5 == 0 and "negative_ids" not in f][:6]  # six paragraphs
    assert len({f["positive_key"] for f in chosen}) == 6
    batch = collate_pairs(MaskingAugmenter(bert_tokenizer, rate=0.0), chosen)
    model = load_classifier(tiny_mlm_folder, task="retrieval").model.eval()
    with torch.no_grad():
        ours = float(contrastive_loss_sum(model, batch, scale=20.0)) / 6
    theirs_model = SentenceTransformer(str(tiny_mlm_folder), device="cpu")  # mean pooling, as ours
    theirs_model.eval()
    loss = MultipleNegativesRankingLoss(theirs_model, scale=20.0)
    queries = [bert_tokenizer.decode(f["input_ids"], skip_special_tokens=True) for f in chosen]
    texts = [bert_tokenizer.decode(f["positive_ids"], skip_special_tokens=True) for f in chosen]
    features = [theirs_model.tokenize(queries), theirs_model.tokenize(texts)]
    with torch.no_grad():
        theirs = float(loss(features, None))
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_finetune_retrieval_writes_a_sentence_transformer_that_embed_and_search_use(
    pairs_file, tiny_mlm_folder, tmp_path, capsys
):
    out = tmp_path / "retrieval"
    argv = ["finetune", str(pairs_file), "--task", "retrieval", "--model", str(tiny_mlm_folder), "--output", str(out),
            "--max-steps", "4", "--eval-every", "2", "--batch-size", "8", "--max-length", "64", "--lr", "5e-3",
            "--validation-share", "0.3"]  # fmt: skip
    assert main(argv) == 0
    assert "ndcg@10" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "retrieval" and results["metric"] == "ndcg@10"
    final = results["final"]
    assert 0 <= final["recall@1"] <= final["recall@5"] <= final["recall@10"] <= 1 and final["corpus"] > 5
    assert "pipeline_tag: sentence-similarity" in (out / "model" / "README.md").read_text()

    # the saved model scores as the run's last evaluation did, and sentence-transformers' evaluator, given
    # the same vectors, computes the same scores
    config = build(FinetuneConfig, {"data": (str(pairs_file),), "task": "retrieval", "max_length": 64, "validation_share": 0.3})
    encoder, tokenizer = load_encoder(out / "model")
    held_out = load_retrieval_data(config, tokenizer).validation
    again = evaluate_retrieval(encoder, tokenizer, held_out, max_length=64)
    assert again.metrics() == pytest.approx({k: final[k] for k in again.metrics()}, abs=1e-6)
    vectors = dict(zip(held_out.queries + held_out.corpus, embed_texts(encoder, tokenizer, held_out.queries + held_out.corpus,
                                                                         pooling="mean", max_length=64)))  # fmt: skip
    evaluator = InformationRetrievalEvaluator(
        {str(i): q for i, q in enumerate(held_out.queries)}, {str(i): t for i, t in enumerate(held_out.corpus)},
        {str(i): {str(r)} for i, r in enumerate(held_out.relevant)}, accuracy_at_k=[1, 5, 10], write_csv=False,
        score_functions={"cosine": cos_sim},
    )  # fmt: skip
    theirs = {key.split("_", 1)[1]: value for key, value in evaluator(Vectors(vectors)).items() if key.startswith("cosine_")}
    for ours, name in (("recall@1", "accuracy@1"), ("recall@5", "accuracy@5"), ("recall@10", "accuracy@10"),
                       ("mrr@10", "mrr@10"), ("ndcg@10", "ndcg@10")):  # fmt: skip
        assert again.scores[ours] == pytest.approx(theirs[name], abs=1e-8), ours
    model = SentenceTransformer(str(out / "model"), device="cpu")  # opens it, mean pooling as trained

    # tokenmask embed pools as it was trained: the vectors are sentence-transformers'
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(held_out.corpus[:5]) + "\n", encoding="utf-8")
    assert (
        main(["embed", str(out / "model"), "--input", str(texts), "--output", str(tmp_path / "e.npy"), "--max-length", "64"]) == 0
    )
    ours_vectors = np.load(tmp_path / "e.npy")
    assert np.allclose(ours_vectors, model.encode(held_out.corpus[:5], normalize_embeddings=True), atol=1e-5)
    argv = ["search", str(out / "model"), "--index", str(tmp_path / "e.npy"), "--texts", str(texts),
            "--query", held_out.corpus[2], "--max-length", "64"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    assert capsys.readouterr().out.split("\n")[0].strip().startswith("1  1.0000")  # the text finds itself


class Vectors:
    """What the evaluator asks of a model (sentence-transformers 3 to 6), answered with given vectors."""

    model_card_data = SimpleNamespace(set_evaluation_metrics=lambda *args, **kwargs: None)

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, texts, **options):
        return torch.from_numpy(np.stack([self.vectors[t] for t in texts]))

    encode_query = encode_document = encode


def test_bm25_finds_the_text_that_shares_the_query_words():
    held_out = RetrievalSet(
        ["who built the castle", "what colour is the sea", "when did the king die"],
        ["the sea is blue in summer", "the old king died in winter", "masons built the castle on a hill", "bread and cheese"],
        [2, 0, 1],
    )
    assert bm25_scores(held_out)["recall@1"] == 1.0
    vectors = np.eye(4, dtype=np.float32)
    assert top_rows(vectors[[2, 0]], vectors, depth=2)[:, 0].tolist() == [2, 0]


def test_embed_texts_pools_as_asked(tiny_mlm_folder):
    encoder, tokenizer = load_encoder(tiny_mlm_folder)
    content, mean, cls = (embed_texts(encoder, tokenizer, ["a king"], pooling=p)[0] for p in ("content", "mean", "cls"))
    assert not np.allclose(content, mean) and not np.allclose(mean, cls)
    with torch.no_grad():
        hidden = encoder(**tokenizer(["a king"], return_tensors="pt")).last_hidden_state[0]
    assert np.allclose(mean, torch.nn.functional.normalize(hidden.mean(0), dim=0).numpy(), atol=1e-6)
