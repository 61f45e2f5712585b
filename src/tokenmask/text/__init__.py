"""Text in: corpora and labelled files read with their bytes checked, tokenizers loaded, masking tables built."""
