"""Everything that touches tokenizers and text: corpora, encoding, packing, the collators.

corpus (read texts) → encode / blocks (ids + word ids) → batch (pad) → collator / augment.
"""
