"""Pre-training data: texts encoded (ids + word ids), packed into fixed-length blocks, split, stored and cached."""
