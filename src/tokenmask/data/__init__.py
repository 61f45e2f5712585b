"""Everything that touches tokenizers, text and datasets: corpora, encoding, packing, the collators.

Pre-training: corpus / tables (read documents) → encode / blocks (ids + word ids) → store /
cache / pretrain (blocks on disk, memory-mapped) → batch (pad) → collator.
Fine-tuning: labelled (read examples, labels, split) → finetune (ids, word ids, aligned labels)
→ sampler (batches of similar length) → batch (pad) → augment.
"""
