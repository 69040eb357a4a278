"""The recorded forward pass: the Model, the lazy trace, layer detail and its cache, row blocks, growth (edits and generated tokens), the logit lens, generation."""
