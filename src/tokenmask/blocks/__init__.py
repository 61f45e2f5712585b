"""Pre-training data: texts encoded (ids + word ids), packed into fixed-length blocks, split, stored and cached.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
