"""The encoder–decoder stepper: source and target boxes, the stage list in an Encoder and a
Decoder section, and the Cross-attention stage (window.py, cross_view.py)."""
