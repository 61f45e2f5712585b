"""Document-aware attention: a packed block gives each document what it gets alone, logits and gradients."""

import copy

import pytest
import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    DebertaV2Config,
    DebertaV2ForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
)

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.train.documents import (
    ATTENTION,
    boundaries,
    document_attention,
    document_mask,
    document_positions,
    keep_documents_apart,
)
from tokenmask.train.heads import head_support, masked_lm_loss, target_logits

V, CLS, SEP, PAD = 60, 2, 3, 1
SHAPE = {"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 2, "intermediate_size": 64}


def tiny(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "bert":
        return BertForMaskedLM(BertConfig(**SHAPE, pad_token_id=0))
    if family == "roberta":  # positions start after the padding id: 2, 3, …
        return RobertaForMaskedLM(RobertaConfig(**SHAPE, pad_token_id=PAD, max_position_embeddings=40))
    # a 4-token sliding window (2 each side) in layers 1 and 2, shorter than the documents
    config = ModernBertConfig(**SHAPE, pad_token_id=0, local_attention=4, global_attn_every_n_layers=3)
    return ModernBertForMaskedLM(config)


DOCUMENTS = [[CLS, 11, 12, 13, 14, 15, 16, SEP], [21, 22, 23, SEP], [31, 32, 33, 34, 35, 36]]  # the last continues
TARGETS = [[1, 4, 6], [0, 2], [1, 3, 5]]


def packed_batch() -> dict[str, torch.Tensor]:
    """One block of the three documents, and a second row: one document and padding."""
    row = [t for d in DOCUMENTS for t in d]  # 18 tokens
    second = [CLS, 41, 42, 43, SEP] + [PAD] * 13
    ids = torch.tensor([row, second])
    labels = torch.full_like(ids, IGNORE_INDEX)
    start = 0
    for document, targets in zip(DOCUMENTS, TARGETS):
        for t in targets:
            labels[0, start + t] = document[t]
        start += len(document)
    labels[1, 2] = 42
    mask = torch.tensor([[1] * 18, [1] * 5 + [0] * 13])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def alone_batches() -> list[dict[str, torch.Tensor]]:
    """Each document as its own sequence, with the same targets, in the packed order."""
    batches = []
    for document, targets in [*zip(DOCUMENTS, TARGETS), ([CLS, 41, 42, 43, SEP], [2])]:
        ids = torch.tensor([document])
        labels = torch.full_like(ids, IGNORE_INDEX)
        for t in targets:
            labels[0, t] = document[t]
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels})
    return batches


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_a_packed_block_equals_each_document_alone(family):
    alone_model = tiny(family).eval()
    packed_model = copy.deepcopy(alone_model)
    assert keep_documents_apart(packed_model, separator=SEP) is None
    assert packed_model.config._attn_implementation == ATTENTION
    assert head_support(packed_model).last_layer  # the last layer at the targets keeps documents apart too

    batch = packed_batch()
    packed_logits, packed_gold = target_logits(packed_model, batch)
    alone = [target_logits(alone_model, b) for b in alone_batches()]
    assert torch.equal(packed_gold, torch.cat([gold for _, gold in alone]))
    torch.testing.assert_close(packed_logits, torch.cat([logits for logits, _ in alone]), atol=1e-5, rtol=1e-4)

    masked_lm_loss(packed_model, batch).loss_sum.backward()
    sum(masked_lm_loss(alone_model, b).loss_sum for b in alone_batches()).backward()
    for (name, p), q in zip(packed_model.named_parameters(), alone_model.parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_without_boundaries_documents_share_attention():
    """The check has teeth: the same block on the plain model differs from the documents alone."""
    model = tiny("bert").eval()
    packed_logits, _ = target_logits(model, packed_batch())
    alone = torch.cat([target_logits(model, b)[0] for b in alone_batches()])
    assert not torch.allclose(packed_logits, alone, atol=1e-3)


def test_boundaries_end_documents_at_separators_and_set_padding_apart():
    # [CLS a SEP b SEP PAD]: documents [0, 3), [3, 5), padding [5, 6)
    ids = torch.tensor([[CLS, 7, SEP, 8, SEP, PAD]])
    found = boundaries(ids, torch.tensor([[1, 1, 1, 1, 1, 0]]), SEP)
    assert found["cu_seq_lens_q"].tolist() == [0, 3, 5, 6]
    assert found["max_length_q"] == 3 and found["cu_seq_lens_q"].dtype == torch.int32
    # rows are documents' edges too: [0, 2) of row 0 continues nothing into row 1
    two = boundaries(torch.tensor([[7, 8], [9, SEP]]), None, SEP)
    assert two["cu_seq_lens_q"].tolist() == [0, 2, 4]


def test_positions_restart_at_each_document_after_the_offset():
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    assert document_positions(cu, 1, 5).tolist() == [[0, 1, 0, 1, 2]]
    assert document_positions(cu, 1, 5, offset=2).tolist() == [[2, 3, 2, 3, 4]]  # RoBERTa: padding id 1, + 1


def test_document_mask_is_block_diagonal_and_never_empty():
    cu = torch.tensor([0, 2, 3, 4], dtype=torch.int32)
    padding = torch.tensor([True, True, True, False])[None, None, None, :].expand(1, 1, 4, 4)
    mask = document_mask(cu, 1, 4, padding)[0, 0].int().tolist()
    # the padding token (3) attends only to itself: a row with no key gives NaN in SDPA
    assert mask == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]


def test_the_cpu_path_is_sdpa_with_the_block_mask():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4) for _ in range(3))
    module = torch.nn.Module()
    module.is_causal = False  # an encoder's attention; SDPA's default would be causal
    plain, _ = document_attention(module, q, k, v, None, scaling=0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.5).transpose(1, 2)
    torch.testing.assert_close(plain, expected)
    cu = torch.tensor([0, 2, 5, 10], dtype=torch.int32)  # row 0: [0, 2) and [2, 5); row 1: one document
    apart, _ = document_attention(module, q, k, v, None, scaling=0.5, cu_seq_lens_q=cu, max_length_q=5)
    first = torch.nn.functional.scaled_dot_product_attention(q[:1, :, :2], k[:1, :, :2], v[:1, :, :2], scale=0.5)
    torch.testing.assert_close(apart[:1, :2], first.transpose(1, 2))
    torch.testing.assert_close(apart[1:], expected[1:])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's varlen_attn runs on CUDA only; the CPU path is tested above")
def test_the_cuda_path_equals_the_exact_one():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0, 20, 64, 100, 128], dtype=torch.int32, device="cuda")
    module = torch.nn.Module()
    module.is_causal = False
    for window in (None, 9):
        fast, _ = document_attention(module, q, k, v, None, scaling=0.2, sliding_window=window, cu_seq_lens_q=cu, max_length_q=44)
        band = None
        if window is not None:
            steps = torch.arange(64, device="cuda")
            band = ((steps[:, None] - steps[None, :]).abs() < window)[None, None].expand(2, 1, 64, 64)
        exact = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), attn_mask=document_mask(cu, 2, 64, band), scale=0.2
        ).transpose(1, 2)
        torch.testing.assert_close(fast.float(), exact, atol=2e-2, rtol=2e-2)


def test_a_family_outside_the_registry_is_named_and_left_as_it_was():
    model = DebertaV2ForMaskedLM(DebertaV2Config(**SHAPE))
    before = model.config._attn_implementation
    reason = keep_documents_apart(model, separator=SEP)
    assert reason is not None and "DebertaV2ForMaskedLM" in reason and "registry" in reason
    assert model.config._attn_implementation == before


def test_attention_per_document_equals_the_block_mask():
    """The two exact CPU paths: documents padded to the longest, and one block-diagonal mask."""
    from tokenmask.train.documents import _per_document

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 12, 4) for _ in range(3))
    cu = torch.tensor([0, 5, 7, 12, 13, 24], dtype=torch.int32)  # row 0: 5, 2, 5 tokens; row 1: 1, 11
    for window in (None, 3):
        band = None
        if window is not None:
            steps = torch.arange(12)
            band = ((steps[:, None] - steps[None, :]).abs() < window)[None, None]
        dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=document_mask(cu, 2, 12, band), scale=0.5)
        torch.testing.assert_close(_per_document(q, k, v, cu, 11, 0.5, 0.0, window), dense.transpose(1, 2))


def tiny_task(family: str, head: str) -> torch.nn.Module:
    import transformers

    masked = tiny(family)
    masked.config.num_labels = 2 if head == "QuestionAnswering" else 3
    torch.manual_seed(1)
    name = (
        type(masked).__name__.replace("ForMaskedLM", "Model")
        if head == "Model"
        else type(masked).__name__.replace("MaskedLM", head)
    )
    return getattr(transformers, name)(masked.config).eval()


@pytest.mark.parametrize(("family", "head"), [("bert", "SequenceClassification"), ("roberta", "QuestionAnswering"),
                                              ("modernbert", "SequenceClassification"), ("modernbert", "TokenClassification"),
                                              ("bert", "Model")])  # fmt: skip
def test_an_unpadded_batch_gives_the_padded_results_and_gradients(family, head):
    padded_model = tiny_task(family, head)
    unpadded_model = copy.deepcopy(padded_model)
    assert keep_documents_apart(unpadded_model, unpad=True) is None
    ids = torch.full((3, 9), PAD)
    for row, length in enumerate([5, 9, 3]):
        ids[row, :length] = torch.arange(10 + row, 10 + row + length)
    real = ids != PAD
    batch = {"input_ids": ids, "attention_mask": real.long()}

    def scores(model):  # per text, or at the real tokens (padding's states differ, and nothing reads them)
        out = model(**batch)
        if head == "Model":  # retrieval's encoder: its states (mean-pooled by the task) and BERT's pooler
            return torch.cat([out.last_hidden_state[real], out.pooler_output])
        logits = torch.stack([out.start_logits, out.end_logits], -1) if head == "QuestionAnswering" else out.logits
        return logits[real] if logits.dim() == 3 else logits

    padded, unpadded = scores(padded_model), scores(unpadded_model)
    torch.testing.assert_close(unpadded, padded, atol=1e-5, rtol=1e-4)
    padded.pow(2).sum().backward()
    unpadded.pow(2).sum().backward()
    for (name, p), q in zip(unpadded_model.named_parameters(), padded_model.parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("family", ["distilbert", "electra", "albert", "xlm-roberta", "camembert"])
def test_the_other_families_of_the_registry_keep_documents_apart(family):
    from transformers import AutoConfig, AutoModelForMaskedLM

    shape = {**SHAPE, "num_hidden_layers": 2, "pad_token_id": PAD, "max_position_embeddings": 40}
    if family == "distilbert":
        shape = {"vocab_size": V, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "pad_token_id": PAD}
    model = AutoModelForMaskedLM.from_config(AutoConfig.for_model(family, **shape))
    assert keep_documents_apart(model, separator=SEP) is None  # the probe: two documents packed = each alone
