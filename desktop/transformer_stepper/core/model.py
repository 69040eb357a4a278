"""A loaded model: config + parameters + tokenizer. `trace(text)` is the public entry point."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from .config import ModelConfig
from .errors import ModelError
from .forward import expected_shapes, forward
from .tokenize import Encoded, Tokenizer
from .trace import Recorder, Trace


def check_params(params: Mapping[str, np.ndarray], config: ModelConfig, source: str) -> None:
    """Every tensor the forward pass reads must be present with its exact shape."""
    for name, shape in expected_shapes(config).items():
        if name not in params:
            raise ModelError(f"{source}: missing tensor {name}")
        actual = tuple(params[name].shape)
        if actual != shape:
            raise ModelError(f"{source}: tensor {name} has shape {actual}, expected {shape}")


class Model:
    def __init__(self, config: ModelConfig, params: Mapping[str, np.ndarray],
                 tokenizer: Tokenizer, source: str = "") -> None:
        check_params(params, config, source or config.name)
        self.config = config
        self.params = dict(params)
        self.tokenizer = tokenizer
        self.source = source
        self.warnings: list[str] = []
        if tokenizer.max_id() >= config.n_vocab:
            raise ModelError(f"{tokenizer.source}: token id {tokenizer.max_id()} is outside "
                             f"the model's vocabulary of {config.n_vocab}")

    @property
    def name(self) -> str:
        return self.config.name or self.source

    def n_params(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def encode(self, text: str) -> Encoded:
        return self.tokenizer.encode(text, max_length=self.config.n_ctx)

    def __call__(self, text: str) -> dict:
        """The untraced forward pass: {"last_hidden_state", "logits"}."""
        encoded = self.encode(text)
        return forward(self.params, self.config, encoded.input_ids, encoded.token_type_ids)

    def trace(self, text: str) -> Trace:
        encoded = self.encode(text)
        return self.trace_encoded(encoded, text)

    def trace_encoded(self, encoded: Encoded, text: str = "") -> Trace:
        recorder = Recorder()
        forward(self.params, self.config, encoded.input_ids, encoded.token_type_ids, recorder)
        arrays = recorder.finish()
        arrays["token_type_ids"] = encoded.token_type_ids.copy()
        arrays["token_type_ids"].flags.writeable = False
        return Trace(config=self.config, text=text, tokens=encoded.tokens,
                     input_ids=encoded.input_ids.copy(), offsets=encoded.offsets.copy(),
                     special_tokens_mask=encoded.special_tokens_mask.copy(),
                     arrays=arrays, truncated=encoded.truncated)
