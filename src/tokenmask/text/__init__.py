"""Text in: corpora and labelled files read with their bytes checked, tokenizers loaded, masking tables built.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
