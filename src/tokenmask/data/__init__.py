"""Everything that touches tokenizers, text and datasets: corpora, encoding, packing, the collators.

corpus / tables (read documents) → encode / blocks (ids + word ids) → store / cache / pretrain
(blocks on disk, memory-mapped) → batch (pad) → collator / augment.
"""
