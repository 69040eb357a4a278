"""Files in and out (no Qt): safetensors, HF folders, the hub cache, npz, key maps."""
