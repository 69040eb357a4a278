"""Two models side by side (the Two Models tab): ui/model_diff/view.py."""
from .view import TwoModelsView

__all__ = ["TwoModelsView"]
