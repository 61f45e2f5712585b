"""A name resolves to the checkpoint it stands for: a folder first, then the name ``minilm``, then a Hub id."""

from pathlib import Path

import pytest
from transformers import BertConfig, BertForMaskedLM

from tokenmask.hub import HubConfig
from tokenmask.text.resources import minilm_dir
from tokenmask.train.models import saved_tokenizer
from tokenmask.train.names import resolve_checkpoint

V = 300


def test_resolve_checkpoint_tells_a_folder_from_the_name_minilm_from_a_hub_id(tmp_path, monkeypatch, bert_tokenizer):
    assert resolve_checkpoint("minilm").folder == minilm_dir() and resolve_checkpoint("minilm").commit is None
    run = tmp_path / "run"
    BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(run / "model")  # fmt: skip
    assert resolve_checkpoint(run / "model").folder == run / "model" == resolve_checkpoint(str(run / "model")).folder
    with pytest.raises(ValueError, match=r"no config.json, not a Hugging Face model folder \(did you mean .*run/model\?\)"):
        resolve_checkpoint(run)
    with pytest.raises(ValueError, match="model 'runs/a/b' is neither a folder, the name minilm, nor a Hub id"):
        resolve_checkpoint("runs/a/b")  # two slashes: no Hub id
    with pytest.raises(ValueError, match="bert-huge is neither a local folder nor in the Hugging Face cache .* HF_HUB_OFFLINE=1"):
        resolve_checkpoint("bert-huge")  # a Hub id, looked up in the (test session's empty) cache
    with pytest.raises(ValueError, match="--revision v2 is for models named by Hub id, but .* is a local folder"):
        resolve_checkpoint(run / "model", hub=HubConfig(revision="v2"))
    monkeypatch.chdir(run)
    (run / "model").rename(run / "minilm")  # a folder named minilm wins over the name
    assert resolve_checkpoint("minilm").folder == Path("minilm")
    with pytest.raises(ValueError, match="no tokenizer files"):
        saved_tokenizer(resolve_checkpoint("minilm"))  # the folder, which holds no tokenizer yet
    bert_tokenizer.save_pretrained(run / "minilm")
    assert saved_tokenizer(resolve_checkpoint("minilm")).get_vocab() == bert_tokenizer.get_vocab()
