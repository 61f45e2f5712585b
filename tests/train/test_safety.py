"""Loading never runs code from a model folder: no remote code, no unpickling of arbitrary objects."""

import json
import pickle

import pytest

from tokenmask.cli.main import main


class Payload:
    """Unpickling this writes a marker file: the harm a malicious checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def code_folder(folder, marker):
    """A model folder whose config asks for its own Python code, which writes ``marker`` when run."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "evil", "architectures": ["EvilForMaskedLM"],
        "auto_map": {"AutoConfig": "modeling_evil.EvilConfig", "AutoModelForMaskedLM": "modeling_evil.EvilForMaskedLM"},
    }))  # fmt: skip
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return folder


@pytest.mark.parametrize("command", ["evaluate", "fill", "pretrain-init", "embed"])
def test_remote_code_in_a_model_folder_is_never_run(command, tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    folder = code_folder(tmp_path / "evil", marker)
    texts = tmp_path / "texts.txt"
    texts.write_text("one line of text\nanother line\n")
    argv = {
        "evaluate": ["evaluate", str(folder), str(texts)],
        "fill": ["fill", str(folder), "a [MASK] here"],
        "pretrain-init": ["pretrain", str(texts), "--init", str(folder), "--output", str(tmp_path / "out"), "--max-steps", "1"],
        "embed": ["embed", str(folder), "--input", str(texts), "--output", str(tmp_path / "x.npy")],
    }[command]
    assert main(argv) == 2
    assert not marker.exists()
    assert "error" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickled_weights_file_is_not_unpickled(tmp_path, bert_tokenizer, capsys):
    from transformers import BertConfig

    marker = tmp_path / "ran.txt"
    folder = tmp_path / "pickled"
    folder.mkdir()
    BertConfig(vocab_size=len(bert_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64).save_pretrained(folder)  # fmt: skip
    bert_tokenizer.save_pretrained(folder)
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"bert.embeddings.word_embeddings.weight": Payload(marker)}))
    assert main(["fill", str(folder), "a [MASK] here"]) == 2
    assert not marker.exists()
    assert "error" in capsys.readouterr().err
