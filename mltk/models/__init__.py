"""Model loading (open_clip), the trimmed text tower, and the multilingual encoders built on it."""
