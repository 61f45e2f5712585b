"""The tests' Hub cache (``hub_checkpoints.py``, fixture ``hub_cache``) is what the libraries expect.

Checked with huggingface_hub and transformers alone, offline, by Hub id: every family loads as
its own model and tokenizer classes; the files, refs and blobs are where and what
huggingface_hub writes; a tag and a commit resolve to the other revision; what is not cached
fails as it fails for an offline user; the special repositories are what their names say.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import huggingface_hub
import pytest
import torch
from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

from hub_checkpoints import FAMILIES, MAX_POSITIONS, REMOTE_CODE_CANARY, check_tokenizer, lay_out_cache


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_by_id_as_its_own_classes(hub_cache, family):
    repo = hub_cache.families[family]
    model = AutoModelForMaskedLM.from_pretrained(repo)
    tokenizer = AutoTokenizer.from_pretrained(repo)
    assert type(model).__name__ == FAMILIES[family].model and model.name_or_path == repo
    embeddings = model.get_input_embeddings().num_embeddings
    check_tokenizer(tokenizer, family=family, embeddings=embeddings)  # class, fast, mask token, sizes, word_ids
    assert model.config.pad_token_id == tokenizer.pad_token_id and tokenizer.model_max_length == MAX_POSITIONS
    batch = tokenizer([f"the {tokenizer.mask_token} of the play", "to be or not to be"], padding=True, return_tensors="pt")
    long = tokenizer(" ".join(["be"] * 2 * MAX_POSITIONS), truncation=True, return_tensors="pt")
    with torch.no_grad():
        assert model(**batch).logits.shape == (*batch["input_ids"].shape, embeddings)
        assert model(**long).logits.shape == (1, MAX_POSITIONS, embeddings)  # the longest input fits the positions


def _etag(content: bytes, name: str) -> str:
    """sha256 for LFS files (weights), the git blob sha1 for the others: what the Hub sends as ETag."""
    if name.endswith((".safetensors", ".bin")):
        return hashlib.sha256(content).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def test_the_cache_is_laid_out_as_huggingface_hub_writes_it(hub_cache):
    info = huggingface_hub.scan_cache_dir()  # reads huggingface_hub.constants.HF_HUB_CACHE
    assert not info.warnings and Path(huggingface_hub.constants.HF_HUB_CACHE) == hub_cache.home / "hub"
    repos = {repo.repo_id: repo for repo in info.repos}
    assert set(hub_cache.commits) <= set(repos)  # other tests lay out more (docs stand-ins)
    for repo, commits in hub_cache.commits.items():
        assert {ref: rev.commit_hash for rev in repos[repo].revisions for ref in rev.refs} == commits, repo
    for repo, name in [(hub_cache.families["roberta"], "model.safetensors"), (hub_cache.minilm, "1_Pooling/config.json")]:
        path = Path(huggingface_hub.hf_hub_download(repo, name))
        assert path == hub_cache.snapshot(repo) / name and path.is_symlink()
        depth = "../" * (len(Path(name).parts) + 1)  # snapshots/<commit>/[folder/]name -> ../../[../]blobs/<etag>
        assert os.readlink(path) == f"{depth}blobs/{_etag(path.read_bytes(), name)}"
    assert huggingface_hub.try_to_load_from_cache(hub_cache.gpt2, "config.json") == str(
        hub_cache.snapshot(hub_cache.gpt2) / "config.json"
    )


def test_snapshot_download_finds_the_snapshot_by_branch_tag_and_commit(hub_cache):
    bert = hub_cache.families["bert"]
    main, v1 = hub_cache.commits[bert]["main"], hub_cache.commits[bert]["v1"]
    assert main != v1
    assert Path(huggingface_hub.snapshot_download(bert)) == hub_cache.snapshot(bert)
    assert Path(huggingface_hub.snapshot_download(bert, revision="v1")) == hub_cache.snapshot(bert, "v1")
    assert Path(huggingface_hub.snapshot_download(bert, revision=v1)) == hub_cache.snapshot(bert, "v1")
    embeddings = {
        revision: AutoModelForMaskedLM.from_pretrained(bert, revision=revision).get_input_embeddings().weight
        for revision in ("main", "v1", v1)
    }
    assert torch.equal(embeddings["v1"], embeddings[v1]) and not torch.equal(embeddings["main"], embeddings["v1"])
    assert AutoTokenizer.from_pretrained(bert, revision="v1").get_vocab() == AutoTokenizer.from_pretrained(bert).get_vocab()


def test_what_is_not_cached_fails_as_it_does_for_an_offline_user(hub_cache):
    bert = hub_cache.families["bert"]
    for repo, revision in [(hub_cache.missing, "main"), (bert, "v2"), (bert, "0" * 40)]:
        with pytest.raises(LocalEntryNotFoundError) as error:
            huggingface_hub.snapshot_download(repo, revision=revision)
        assert "HF_HUB_OFFLINE=0" in str(error.value), (repo, revision)
    with pytest.raises(LocalEntryNotFoundError):
        huggingface_hub.hf_hub_download(bert, "no-such-file.json")  # offline: a missing file is not told from a missing repo
    assert huggingface_hub.try_to_load_from_cache(hub_cache.missing, "config.json") is None
    for load in (AutoModelForMaskedLM.from_pretrained, AutoTokenizer.from_pretrained):
        with pytest.raises(OSError, match="couldn't connect to 'https://huggingface.co'") as error:
            load(hub_cache.missing)
        assert type(error.value) is OSError  # transformers re-raises huggingface_hub's error as a plain OSError


def test_a_cache_without_listings_and_a_partial_snapshot(hub_cache, tmp_path):
    """Caches written before huggingface_hub 2 have no ``trees/``: offline, a branch and a commit
    still resolve. With a listing, a snapshot missing a listed file is refused as incomplete."""
    bert = hub_cache.snapshot(hub_cache.families["bert"])
    old = lay_out_cache(tmp_path, "old/bert", bert, listing=False)
    partial = lay_out_cache(tmp_path, "partial/bert", bert, leave_out={"model.safetensors"})
    cache = tmp_path / "hub"
    assert not (cache / "models--old--bert" / "trees").exists()
    for revision in ("main", old):
        assert Path(huggingface_hub.snapshot_download("old/bert", revision=revision, cache_dir=cache)).name == old
    assert Path(huggingface_hub.snapshot_download("partial/bert", cache_dir=cache, allow_patterns=["*.json"])).name == partial
    with pytest.raises(IncompleteSnapshotError, match="model.safetensors") as error:
        huggingface_hub.snapshot_download("partial/bert", cache_dir=cache)
    assert isinstance(error.value, LocalEntryNotFoundError) and Path(error.value.snapshot_path).name == partial


def test_remote_code_runs_only_when_trusted(hub_cache, monkeypatch):
    monkeypatch.delenv(REMOTE_CODE_CANARY, raising=False)
    with pytest.raises(ValueError, match="contains custom code"):
        AutoModelForMaskedLM.from_pretrained(hub_cache.remote_code, trust_remote_code=False)
    assert REMOTE_CODE_CANARY not in os.environ
    model = AutoModelForMaskedLM.from_pretrained(hub_cache.remote_code, trust_remote_code=True)
    assert type(model).__name__ == "CustomForMaskedLM" and os.environ[REMOTE_CODE_CANARY] == "1"


def test_a_pickle_only_repository_has_the_same_weights_as_pytorch_model_bin(hub_cache):
    files = {path.name for path in hub_cache.snapshot(hub_cache.pickle_only).iterdir()}
    assert "pytorch_model.bin" in files and "model.safetensors" not in files
    with pytest.raises(OSError, match="model.safetensors"):
        AutoModelForMaskedLM.from_pretrained(hub_cache.pickle_only, use_safetensors=True)
    pickled = AutoModelForMaskedLM.from_pretrained(hub_cache.pickle_only).state_dict()  # torch.load(weights_only=True)
    safe = AutoModelForMaskedLM.from_pretrained(hub_cache.families["bert"]).state_dict()
    assert pickled.keys() == safe.keys() and all(torch.equal(pickled[k], safe[k]) for k in safe)


def test_gpt2_is_a_decoder_without_a_mask_token(hub_cache):
    with pytest.raises(ValueError, match="Unrecognized configuration class"):
        AutoModelForMaskedLM.from_pretrained(hub_cache.gpt2)
    assert type(AutoModelForCausalLM.from_pretrained(hub_cache.gpt2)).__name__ == "GPT2LMHeadModel"
    assert AutoTokenizer.from_pretrained(hub_cache.gpt2).mask_token is None


def test_minilm_is_the_real_encoder_without_an_mlm_head(hub_cache):
    assert type(AutoModel.from_pretrained(hub_cache.minilm)).__name__ == "BertModel"
    _, info = AutoModelForMaskedLM.from_pretrained(hub_cache.minilm, output_loading_info=True)
    assert info["missing_keys"] and all(key.startswith("cls.") for key in info["missing_keys"])
    assert len(AutoTokenizer.from_pretrained(hub_cache.minilm)) == 30522
