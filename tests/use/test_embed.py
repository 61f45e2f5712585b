"""Sentence embeddings: pooling over content tokens only, batch-independent results, cosine
search, an index that never unpickles, the real MiniLM encoder, and the embed/search commands."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertModel

from tokenmask.cli.main import main
from tokenmask.train.presets import build_model
from tokenmask.use.embed import embed_texts, load_encoder, load_index, mean_pool, save_index, search

TEXTS = [
    "To be, or not to be",
    "a",
    "Now is the winter of our discontent made glorious summer by this sun of York",
    "Friends, Romans, countrymen, lend me your ears",
    "All the world's a stage",
    "Brevity is the soul of wit",
    "The quality of mercy is not strained; it droppeth as the gentle rain from heaven",
]


@pytest.fixture(scope="module")
def tiny_bert(bert_tokenizer):
    """A random 2-layer, 32-wide BertModel on the real bert-base-uncased vocabulary."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    return BertModel(config, add_pooling_layer=False).eval()


def naive_embedding(model, ids: list[int], keep: list[bool]) -> torch.Tensor:
    """One text alone (no padding at all): the plain average of the kept hidden states."""
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]  # (T, H)
    kept = [hidden[t] for t in range(len(ids)) if keep[t]]
    return sum(kept) / len(kept)


# pooling and batching, exact


def test_mean_pool_hand_case():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]] * 2)  # (2, 4, 2)
    keep = torch.tensor([[False, True, True, False], [True, False, False, True]])
    # row 0: ([3, 4] + [5, 6]) / 2 = [4, 5]; row 1: ([1, 2] + [7, 8]) / 2 = [4, 5] too
    assert mean_pool(hidden, keep).tolist() == [[4.0, 5.0], [4.0, 5.0]]
    assert mean_pool(hidden, torch.zeros(2, 4, dtype=torch.bool)).tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("max_length", [256, 8])  # 8 cuts the long texts: [CLS] + 6 tokens + [SEP]
def test_vector_is_the_mean_over_non_special_unpadded_tokens(tiny_bert, bert_tokenizer, max_length):
    assert max(len(bert_tokenizer(text)["input_ids"]) for text in TEXTS) > 8
    vectors = embed_texts(tiny_bert, bert_tokenizer, TEXTS, batch_size=len(TEXTS), max_length=max_length, normalize=False)
    assert vectors.shape == (len(TEXTS), 32) and vectors.dtype == np.float32
    for text, vector in zip(TEXTS, vectors):
        ids = bert_tokenizer(text, truncation=True, max_length=max_length)["input_ids"]
        assert ids[0] == bert_tokenizer.cls_token_id and ids[-1] == bert_tokenizer.sep_token_id
        assert len(ids) <= max_length
        content = [0 < t < len(ids) - 1 for t in range(len(ids))]  # all but [CLS] ... [SEP]
        assert np.allclose(vector, naive_embedding(tiny_bert, ids, content).numpy(), atol=1e-5)
        # the specials move the mean: counting them would fail the check above
        with_specials = naive_embedding(tiny_bert, ids, [True] * len(ids)).numpy()
        assert np.abs(vector - with_specials).max() > 1e-3


def test_batch_size_and_input_order_do_not_change_the_vectors(tiny_bert, bert_tokenizer):
    alone = embed_texts(tiny_bert, bert_tokenizer, TEXTS, batch_size=1)  # no padding anywhere
    for batch_size in (2, 3, 5, 32):
        batched = embed_texts(tiny_bert, bert_tokenizer, TEXTS, batch_size=batch_size)
        assert np.allclose(batched, alone, atol=1e-5), batch_size
    reversed_rows = embed_texts(tiny_bert, bert_tokenizer, TEXTS[::-1], batch_size=3)
    assert np.allclose(reversed_rows[::-1], alone, atol=1e-5)


def test_normalize_gives_unit_rows_in_the_same_direction(tiny_bert, bert_tokenizer):
    raw = embed_texts(tiny_bert, bert_tokenizer, TEXTS, normalize=False)
    unit = embed_texts(tiny_bert, bert_tokenizer, TEXTS)
    assert np.allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-2)
    assert np.allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


def test_progress_counts_texts_and_empty_input_gives_no_rows(tiny_bert, bert_tokenizer):
    calls = []
    embed_texts(tiny_bert, bert_tokenizer, TEXTS, batch_size=3, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(3, 7), (6, 7), (7, 7)]
    assert embed_texts(tiny_bert, bert_tokenizer, []).shape == (0, 32)


def test_a_text_without_content_tokens_gets_the_mean_of_its_specials(tiny_bert, bert_tokenizer):
    (vector,) = embed_texts(tiny_bert, bert_tokenizer, [""], normalize=False)
    ids = [bert_tokenizer.cls_token_id, bert_tokenizer.sep_token_id]
    assert np.allclose(vector, naive_embedding(tiny_bert, ids, [True, True]).numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"max_length": 2}, "over the 2 special tokens"),
        ({"max_length": 513}, "over the model's position limit 512"),
    ],
)
def test_bad_settings_are_refused(tiny_bert, bert_tokenizer, settings, message):
    with pytest.raises(ValueError, match=message):
        embed_texts(tiny_bert, bert_tokenizer, TEXTS, **settings)


# search, exact


def test_search_ranks_rows_by_cosine():
    index = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0], [5.0, 0.0]])
    # cosines with [1, 0]: 1, 0, 1/sqrt(2), 0 (zero row), 1; ties keep row order
    hits = search(index, np.array([1.0, 0.0]), top_k=3)
    assert [row for row, _ in hits] == [0, 4, 2]
    assert [score for _, score in hits] == pytest.approx([1.0, 1.0, 2**-0.5])
    assert [row for row, _ in search(index, np.array([-1.0, 0.0]), top_k=10)] == [1, 3, 2, 0, 4]
    assert search(index, np.zeros(2), top_k=1) == [(0, 0.0)]


def test_search_refuses_mismatched_shapes_and_top_k():
    with pytest.raises(ValueError, match=r"\(N, H\) index and an \(H,\) query"):
        search(np.ones((3, 4)), np.ones(5), top_k=1)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        search(np.ones((3, 4)), np.ones(4), top_k=0)


# the index file


class _Trap:
    """Unpickling this creates a file: proof that a loader unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_index_round_trips_as_float32_to_the_exact_path(tmp_path):
    vectors = np.arange(6, dtype=np.float64).reshape(2, 3)
    path = save_index(tmp_path / "sub" / "vectors.idx", vectors)
    assert path == tmp_path / "sub" / "vectors.idx" and sorted(p.name for p in path.parent.iterdir()) == ["vectors.idx"]
    loaded = load_index(path)
    assert loaded.dtype == np.float32 and loaded.tolist() == vectors.tolist()


def test_index_loading_never_unpickles_and_checks_the_array(tmp_path):
    marker = tmp_path / "unpickled"
    np.save(tmp_path / "trap.npy", np.array([_Trap(marker)], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a plain .npy array"):
        load_index(tmp_path / "trap.npy")
    assert not marker.exists()
    for name, array, message in [
        ("flat.npy", np.ones(4), "expected a 2-D float array"),
        ("ints.npy", np.ones((2, 2), dtype=np.int64), "expected a 2-D float array"),
        ("nan.npy", np.array([[1.0, np.nan]]), "NaN or infinite"),
    ]:
        np.save(tmp_path / name, array)
        with pytest.raises(ValueError, match=message):
            load_index(tmp_path / name)
    (tmp_path / "text.npy").write_text("not an array", encoding="utf-8")
    with pytest.raises(ValueError, match="not a plain .npy array"):
        load_index(tmp_path / "text.npy")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_index(tmp_path / "missing.npy")


# loading encoders


def saved_masked_lm(folder, preset, tokenizer):
    """A random masked-LM of ``preset`` saved with ``tokenizer``; returns the in-memory model."""
    torch.manual_seed(0)
    model = build_model(preset, vocab_size=len(tokenizer), max_length=64, pad_token_id=tokenizer.pad_token_id).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


@pytest.mark.parametrize(
    "preset, tokenizer_name", [("bert-tiny", "bert"), ("roberta-tiny", "roberta"), ("modernbert-tiny", "bert")]
)
def test_a_masked_lm_folder_loads_as_its_trained_encoder(preset, tokenizer_name, tmp_path, bert_tokenizer, roberta_tokenizer):
    tokenizer = {"bert": bert_tokenizer, "roberta": roberta_tokenizer}[tokenizer_name]
    masked_lm = saved_masked_lm(tmp_path, preset, tokenizer)
    encoder, loaded_tokenizer = load_encoder(tmp_path, device="cpu")
    assert "ForMaskedLM" not in type(encoder).__name__ and not encoder.training
    assert len(loaded_tokenizer) == len(tokenizer)
    expected = embed_texts(masked_lm.base_model, tokenizer, TEXTS[:4], max_length=64)
    assert np.allclose(embed_texts(encoder, loaded_tokenizer, TEXTS[:4], max_length=64), expected, atol=1e-5)


def test_roberta_position_limit_counts_the_padding_offset(tmp_path, roberta_tokenizer):
    saved_masked_lm(tmp_path, "roberta-tiny", roberta_tokenizer)
    encoder, tokenizer = load_encoder(tmp_path, device="cpu")
    # 512 + pad + 1 position rows, positions numbered from pad + 1: 512 usable
    assert encoder.config.max_position_embeddings == 512 + tokenizer.pad_token_id + 1
    assert embed_texts(encoder, tokenizer, ["a"], max_length=512).shape == (1, 128)
    with pytest.raises(ValueError, match="position limit 512"):
        embed_texts(encoder, tokenizer, ["a"], max_length=513)


def test_folders_that_are_no_encoder_checkpoint_are_refused(tmp_path, bert_tokenizer):
    run = tmp_path / "run"
    saved_masked_lm(run / "model", "bert-tiny", bert_tokenizer)
    with pytest.raises(ValueError, match=r"no config.json, not a Hugging Face model folder \(did you mean .*run/model\?\)"):
        load_encoder(run)
    no_tokenizer = tmp_path / "bare"
    build_model("bert-tiny", vocab_size=len(bert_tokenizer), max_length=64, pad_token_id=0).save_pretrained(no_tokenizer)
    with pytest.raises(ValueError, match="no tokenizer files"):
        load_encoder(no_tokenizer)
    # a checkpoint missing a layer would embed with random weights there
    weights = load_file(run / "model" / "model.safetensors")
    save_file({k: v for k, v in weights.items() if ".layer.1." not in k}, run / "model" / "model.safetensors")
    with pytest.raises(ValueError, match="lacks encoder weights .*encoder.layer.1"):
        load_encoder(run / "model")
    with pytest.raises(ValueError, match="neither a folder, the name minilm, nor a Hub id"):
        load_encoder(tmp_path / "nothing")


# the real encoder

DOCUMENTS = [
    "Recipe for baking a loaf of bread",
    "The stock market fell sharply on Monday",
    "How to change a flat tyre on a bicycle",
    "Symptoms of the common cold and flu",
    "Best hiking trails in the Alps",
    "Python list comprehension examples",
    "The history of the Roman Empire",
    "Training a puppy to sit and stay",
    "Tips for saving money on groceries",
    "How to learn to play the guitar",
]
QUERIES = {
    "How do I bake bread?": 0,
    "Why did shares drop this week?": 1,
    "fixing a punctured bike wheel": 2,
    "teach my dog commands": 7,
    "mountain walks in Switzerland": 4,
}


@pytest.fixture(scope="module")
def minilm():
    return load_encoder("minilm", device="cpu")


def test_minilm_ranks_the_paraphrase_first(minilm):
    model, tokenizer = minilm
    assert model.config.hidden_size == 384
    index = embed_texts(model, tokenizer, DOCUMENTS)
    queries = embed_texts(model, tokenizer, list(QUERIES))
    for (query, expected), vector in zip(QUERIES.items(), queries):
        (best, best_score), (_, second_score) = search(index, vector, top_k=2)
        assert best == expected, query
        assert best_score - second_score > 0.15, query  # measured margins: 0.22 to 0.50


# the commands


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, bert_tokenizer):
    folder = tmp_path_factory.mktemp("tiny") / "model"
    saved_masked_lm(folder, "bert-tiny", bert_tokenizer)
    return folder


@pytest.fixture
def texts_file(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS[:3]) + "\n\n" + "\n".join(TEXTS[3:]) + "\n", encoding="utf-8")  # a blank line: skipped
    return path


def test_embed_then_search_end_to_end(tiny_folder, texts_file, tmp_path, capsys):
    index = tmp_path / "emb.npy"
    assert main(["embed", str(tiny_folder), "--input", str(texts_file), "--output", str(index), "--batch-size", "3"]) == 0
    assert "embedded 7 texts into unit-length 128-dim vectors" in capsys.readouterr().out
    vectors = np.load(index, allow_pickle=False)
    assert vectors.shape == (7, 128) and vectors.dtype == np.float32
    argv = ["search", str(tiny_folder), "--index", str(index), "--texts", str(texts_file), "--query", TEXTS[4]]
    assert main([*argv, "--top-k", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["query"] == TEXTS[4] and [r["rank"] for r in report["results"]] == [1, 2, 3]
    first = report["results"][0]  # the query is one of the texts: the same vector
    assert (first["row"], first["text"]) == (4, TEXTS[4]) and first["score"] == pytest.approx(1.0, abs=1e-5)
    scores = [r["score"] for r in report["results"]]
    assert scores == sorted(scores, reverse=True)
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0].split(maxsplit=2) == ["1", "1.0000", TEXTS[4]]


def test_embed_no_normalize_keeps_the_plain_means(tiny_folder, texts_file, tmp_path, capsys, bert_tokenizer):
    index = tmp_path / "raw.npy"
    assert main(["embed", str(tiny_folder), "--input", str(texts_file), "--output", str(index), "--no-normalize"]) == 0
    assert "unnormalised 128-dim" in capsys.readouterr().out
    encoder, tokenizer = load_encoder(tiny_folder, device="cpu")
    assert np.allclose(np.load(index), embed_texts(encoder, tokenizer, TEXTS, normalize=False), atol=1e-6)


def test_embed_and_search_with_minilm(tmp_path, capsys):
    documents = tmp_path / "docs.jsonl"
    documents.write_text("\n".join(json.dumps({"body": d}) for d in DOCUMENTS), encoding="utf-8")
    index = tmp_path / "docs.npy"
    assert main(["embed", "minilm", "--input", str(documents), "--text-field", "body", "--output", str(index)]) == 0
    capsys.readouterr()
    argv = ["search", "minilm", "--index", str(index), "--texts", str(documents), "--text-field", "body"]
    assert main([*argv, "--query", "How do I bake bread?", "--top-k", "2", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results[0]["text"] == "Recipe for baking a loaf of bread" and results[0]["score"] > 0.7


@pytest.mark.parametrize(
    "case, message",
    [
        ("rows", "has 6 rows but the texts hold 7"),
        ("dims", "has 5 dimensions but the model's hidden size is 128"),
        ("empty input", "no text (empty, or blank lines only)"),
        ("missing input", "no such file"),
        ("missing index", "no such file"),
        ("unknown model", "bert-huge is neither a local folder nor in the Hugging Face cache"),  # a Hub id, offline
        ("pickled index", "not a plain .npy array"),
        ("empty query", "the query is empty"),
        ("max length", "max_length must be over the 2 special tokens"),
        ("batch size", "batch_size must be >= 1; got 0"),
    ],
)
def test_errors_exit_2_with_one_line(case, message, tiny_folder, texts_file, tmp_path, capsys):
    good, wrong_rows, wrong_dims = tmp_path / "good.npy", tmp_path / "rows.npy", tmp_path / "dims.npy"
    np.save(good, np.ones((7, 128), dtype=np.float32))
    np.save(wrong_rows, np.ones((6, 128), dtype=np.float32))
    np.save(wrong_dims, np.ones((7, 5), dtype=np.float32))
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "blank.txt").write_text("\n  \n\n", encoding="utf-8")
    model, texts = str(tiny_folder), str(texts_file)

    def search_argv(index, query="kings", model=model):
        return ["search", model, "--index", str(index), "--texts", texts, "--query", query]

    def embed_argv(*extra, source=texts):
        return ["embed", model, "--input", source, "--output", str(tmp_path / "out.npy"), *extra]

    argv = {
        "rows": search_argv(wrong_rows),
        "dims": search_argv(wrong_dims),
        "empty input": embed_argv(source=str(tmp_path / "blank.txt")),
        "missing input": embed_argv(source=str(tmp_path / "nope.txt")),
        "missing index": search_argv(tmp_path / "nope.npy"),
        "unknown model": search_argv(good, model="bert-huge"),
        "pickled index": search_argv(tmp_path / "pickled.npy"),
        "empty query": search_argv(good, query="  "),
        "max length": embed_argv("--max-length", "2"),
        "batch size": embed_argv("--batch-size", "0"),
    }[case]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out.npy").exists()


def test_the_user_facing_names_are_exported_lazily():
    import tokenmask

    assert (tokenmask.load_encoder, tokenmask.embed_texts, tokenmask.search) == (load_encoder, embed_texts, search)
    assert {"load_encoder", "embed_texts", "search"} <= set(tokenmask.__all__)


@pytest.mark.parametrize(
    "config, pooling",
    [
        ({"pooling_mode": "mean"}, "mean"),  # sentence-transformers 6
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),  # earlier versions
        ({"pooling_mode_cls_token": True}, "cls"),
        ({"pooling_mode": "max"}, None),
    ],
)
def test_a_sentence_transformers_folder_is_pooled_as_it_says(tmp_path, config, pooling):
    import json

    from tokenmask.train.models import saved_pooling

    assert saved_pooling(tmp_path) == "content"  # no modules.json: a plain encoder
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    modules = [{"idx": 0, "path": "", "type": "x.Transformer"}, {"idx": 1, "path": "1_Pooling", "type": "x.models.Pooling"}]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    if pooling is None:
        with pytest.raises(ValueError, match="pooling max is not supported"):
            saved_pooling(tmp_path)
    else:
        assert saved_pooling(tmp_path) == pooling
