"""Using a trained model, without an optimizer: fixed-mask evaluation, metrics, fill-mask, embeddings, masking audits."""
