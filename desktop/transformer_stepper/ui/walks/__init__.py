"""Questions: the guided walks' dock."""
