"""GGUF files (llama.cpp, Ollama, LM Studio): reader, blocks, dequantization, tokenizer, the model built from the file, and the local stores that hold them."""
