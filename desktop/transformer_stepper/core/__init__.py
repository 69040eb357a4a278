"""numpy-only transformer core: no Qt, no file formats."""
