"""Using a trained model, without an optimizer: fixed-mask evaluation, metrics, fill-mask, embeddings, masking audits.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
