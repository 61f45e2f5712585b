"""Fine-tuning inputs: class ids, tags aligned to the first piece of each word, truncation counted,
ids unique, unseen validation labels refused, rows the augmenter takes as they are."""

import pytest
import torch

from tokenmask import IGNORE_INDEX, MaskingAugmenter
from tokenmask.labelled.align import (
    LabelledExample,
    align_labels,
    encode_tagged_sentences,
    encode_texts_with_labels,
    prepare_finetune_data,
)
from tokenmask.labelled.examples import LabelledText, TaggedSentence, class_vocab, tag_vocab

X = IGNORE_INDEX


def test_align_labels_first_piece_of_each_word():
    # [CLS] un ##para ##lle ##led film [SEP]
    assert align_labels([-1, 0, 0, 0, 0, 1, -1], [3, 0]) == [X, 3, X, X, X, 0, X]
    assert align_labels([None, 0, 1, 1, None], [2, 5]) == [X, 2, 5, X, X]
    assert align_labels([None, None], []) == [X, X]


def test_classification_example_by_hand(bert_tokenizer):
    labels = class_vocab(["rotten", "fresh"])
    encoded = encode_texts_with_labels(
        [LabelledText("A fine film.", "fresh"), LabelledText("Dull.", "rotten")], bert_tokenizer, labels, first_id=5
    )
    assert encoded.truncated == 0
    assert encoded.examples[0] == {
        "input_ids": [101, 1037, 2986, 2143, 1012, 102],  # [CLS] a fine film . [SEP]
        "word_ids": [-1, 0, 1, 2, 3, -1],
        "labels": 0,
        "id": 5,
    }
    assert encoded.examples[1]["labels"] == 1 and encoded.examples[1]["id"] == 6
    assert set(encoded.examples[0]) == LabelledExample.__required_keys__


def test_tags_go_to_the_first_piece_of_a_word_split_in_four(bert_tokenizer):
    labels = tag_vocab(["O", "B-LOC", "B-MISC"])  # ("O", "B-LOC", "B-MISC")
    sentence = TaggedSentence(("Paris", "unparalleled", "!"), ("B-LOC", "B-MISC", "O"))
    (example,) = encode_tagged_sentences([sentence], bert_tokenizer, labels).examples
    tokens = bert_tokenizer.convert_ids_to_tokens(example["input_ids"])
    assert tokens == ["[CLS]", "paris", "un", "##para", "##lle", "##led", "!", "[SEP]"]
    assert example["word_ids"] == [-1, 0, 1, 1, 1, 1, 2, -1]
    assert example["labels"] == [X, 1, 2, X, X, X, 0, X]
    assert example["id"] == 0


@pytest.mark.parametrize("name", ["bert-base-uncased", "roberta-gpt2", "trained-bpe", "trained-unigram", "trained-wordpiece"])
def test_tagged_words_get_the_pieces_of_running_text(name, tokenizers):
    """Byte-level BPE spells a word's leading space into its first piece (``Ġvisited``): words given
    one by one must come out as in the sentence, not each as if it began a text (``v is it ed``)."""
    tokenizer = tokenizers[name]
    words = ("Anna", "visited", "new", "york", "today")
    labels = tag_vocab(["O", "B-PER", "B-LOC", "I-LOC"])
    tags = ("B-PER", "O", "B-LOC", "I-LOC", "O")
    (example,) = encode_tagged_sentences([TaggedSentence(words, tags)], tokenizer, labels).examples
    running = tokenizer(" ".join(words))
    assert example["input_ids"] == running["input_ids"]
    assert example["word_ids"] == [-1 if w is None else w for w in running.word_ids()]
    assert [label for label in example["labels"] if label != X] == [labels.label2id[tag] for tag in tags]


def test_truncation_is_counted_and_keeps_the_special_tokens(bert_tokenizer):
    texts = [LabelledText("one two three four five six seven", "a"), LabelledText("one two", "a")]
    encoded = encode_texts_with_labels(texts, bert_tokenizer, class_vocab(["a"]), max_length=5)
    assert encoded.truncated == 1
    tokens = bert_tokenizer.convert_ids_to_tokens(encoded.examples[0]["input_ids"])
    assert tokens == ["[CLS]", "one", "two", "three", "[SEP]"]
    assert encoded.examples[0]["word_ids"] == [-1, 0, 1, 2, -1]
    assert len(encoded.examples[1]["input_ids"]) == 4  # short ones untouched

    tagged = [TaggedSentence(("Paris", "unparalleled", "!"), ("B-LOC", "O", "O"))]
    cut = encode_tagged_sentences(tagged, bert_tokenizer, tag_vocab(["O", "B-LOC"]), max_length=5)
    assert (cut.truncated, cut.lost_words) == (1, 1)  # "!" is cut off, "unparalleled" keeps its first pieces
    assert cut.examples[0]["labels"] == [X, 1, 0, X, X]
    with pytest.raises(ValueError, match="max_length must leave room for text"):
        encode_texts_with_labels(texts, bert_tokenizer, class_vocab(["a"]), max_length=2)


def test_prepare_splits_builds_labels_from_training_and_numbers_ids(bert_tokenizer):
    examples = [LabelledText(f"review number {i}", "fresh" if i % 3 else "rotten", f"movie {i % 17}") for i in range(300)]
    data = prepare_finetune_data(examples, bert_tokenizer, validation_share=0.2, split_by="group")
    assert data.task == "classify" and data.labels.labels == ("fresh", "rotten")
    assert len(data.train) + len(data.validation) == 300 and data.validation
    assert data.train_counts.examples == len(data.train) and data.validation_counts.examples == len(data.validation)
    assert sum(data.train_counts.labels.values()) == len(data.train)
    ids = [e["id"] for e in data.train + data.validation]
    assert ids == list(range(300))  # validation ids follow the training ones
    assert data.truncated == (0, 0)
    assert "task classify: 2 labels (fresh, rotten)" in data.describe()
    assert "truncated at 128 tokens: 0 train, 0 validation" in data.describe()


def test_a_validation_label_unseen_in_training_is_refused(bert_tokenizer):
    train = [LabelledText("good", "fresh"), LabelledText("bad", "rotten")]
    message = "validation labels not seen in training: 'meh'; training labels: 'fresh', 'rotten'"
    with pytest.raises(ValueError, match=message):
        prepare_finetune_data(train, bert_tokenizer, validation=[LabelledText("so-so", "meh")])
    tagged = [TaggedSentence(("Paris",), ("B-LOC",))]
    with pytest.raises(ValueError, match="validation labels not seen in training: 'B-PER'; training labels: 'B-LOC'"):
        prepare_finetune_data(tagged, bert_tokenizer, validation=[TaggedSentence(("Peter",), ("B-PER",))])


def test_tasks_follow_the_example_type_and_must_not_mix(bert_tokenizer):
    tagged = [TaggedSentence(("EU", "rejects"), ("B-ORG", "O")), TaggedSentence(("Peter",), ("B-PER",))]
    data = prepare_finetune_data(tagged, bert_tokenizer, validation=tagged[1:])
    assert data.task == "tokens" and data.labels.labels == ("O", "B-ORG", "B-PER")
    assert data.validation[0]["labels"] == [X, 2, X] and data.validation[0]["id"] == 2
    assert "tagged words without a token: 0 train, 0 validation" in data.describe()
    with pytest.raises(ValueError, match="must all be LabelledText"):
        prepare_finetune_data([tagged[0], LabelledText("a", "b")], bert_tokenizer)
    with pytest.raises(ValueError, match="are not for task 'tokens'"):
        prepare_finetune_data(tagged, bert_tokenizer, validation=[LabelledText("a", "b")])
    with pytest.raises(ValueError, match="no examples"):
        prepare_finetune_data([], bert_tokenizer)


def test_rows_go_through_the_augmenter_with_whole_word_masking(bert_tokenizer):
    tagged = [
        TaggedSentence(("Paris", "unparalleled", "!"), ("B-LOC", "O", "O")),
        TaggedSentence(("EU",), ("B-ORG",)),
    ]
    data = prepare_finetune_data(tagged, bert_tokenizer, validation=tagged[:1])
    augmenter = MaskingAugmenter(bert_tokenizer, rate=1.0, strategy="whole_word")
    batch = augmenter(data.train)
    assert batch["labels"].tolist() == [[X, 1, 0, X, X, X, 0, X], [X, 2, X, X, X, X, X, X]]
    masked = batch["input_ids"] == bert_tokenizer.mask_token_id
    assert masked[0].tolist() == [False] + [True] * 6 + [False]  # every word, every piece of it
    assert torch.equal(augmenter.eval()(data.train)["input_ids"][1, :3], torch.tensor(data.train[1]["input_ids"]))


def test_the_fine_tuning_data_api_is_exported():
    import tokenmask
    from tokenmask.labelled import align as finetune
    from tokenmask.labelled import examples as labelled
    from tokenmask.labelled import sampler

    for module, names in [
        (labelled, ["LabelledText", "TaggedSentence", "read_labelled_texts", "read_tagged_sentences", "rotten_tomatoes"]),
        (finetune, ["prepare_finetune_data"]),
        (sampler, ["LengthGroupedBatches"]),
    ]:
        for name in names:
            assert getattr(tokenmask, name) is getattr(module, name) and name in tokenmask.__all__
