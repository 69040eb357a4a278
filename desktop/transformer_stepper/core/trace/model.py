"""A loaded model: config + parameters + tokenizer. `trace(text)` is the public entry point.
A causal trace grown or cut by rows (extend, retrace, truncate, shared_rows) is core/trace/growth.py's
functions, which Model's methods of those names call."""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from ..model import interventions as interventions_lib
from . import row_blocks
from ..model.config import ModelConfig
from ..model.errors import ModelError
from ..model.params import ParamStore, expected_shapes
from ..model.forward import block, finish, forward, sinks_of
from ..model.head import head_product, vocabulary_logits
from ..model.kv_cache import KVCache
from ..model.layer_context import context
from ..model.tokenize import Encoded, Tokenizer
from .layer_detail import AttentionRule, LayerDetail, lean_blocks
from . import growth
from .growth import TraceParts
from ..model.ops import quiet_floats
from .recorder import Recorder
from .trace import DEFAULT_DETAIL_BUDGET, PASS_KEPT, Trace


def check_params(params: Mapping[str, np.ndarray], config: ModelConfig,
                 source: str) -> Mapping[str, np.ndarray]:
    """Every tensor the forward pass reads must be present, float, with its exact shape.
    -> the parameters as read-only float32 arrays (float32 ones, memory-mapped or not, are
    not copied). A ParamStore (read on use) is checked by its shapes, without reading."""
    if isinstance(params, ParamStore):
        for name, shape in expected_shapes(config).items():
            if name not in params:
                raise ModelError(f"{source}: missing tensor {name}")
            if tuple(params.shape(name)) != shape:
                raise ModelError(f"{source}: tensor {name} has shape {tuple(params.shape(name))}, "
                                 f"expected {shape}")
        return params
    checked: dict[str, np.ndarray] = {}
    for name, shape in expected_shapes(config).items():
        if name not in params:
            raise ModelError(f"{source}: missing tensor {name}")
        value = np.asarray(params[name])
        if tuple(value.shape) != shape:
            raise ModelError(f"{source}: tensor {name} has shape {tuple(value.shape)}, expected {shape}")
        if value.dtype.kind != "f":
            raise ModelError(f"{source}: tensor {name} has dtype {value.dtype}, expected float")
        if value.dtype != np.float32:  # float64 would spread through every product
            value = value.astype(np.float32)
        value = value.view()  # freeze a view, not the caller's array
        value.flags.writeable = False
        checked[name] = value
    return checked


class Model:
    def __init__(self, config: ModelConfig, params: Mapping[str, np.ndarray],
                 tokenizer: Tokenizer, source: str = "") -> None:
        where = source or config.name or "model"
        self.params = check_params(params, config, where)
        self.config = config
        self.tokenizer = tokenizer
        self.source = source
        self.warnings: list[str] = []
        self.settings_guessed: tuple[str, ...] = ()   # 'field=value' a lone file could not tell
        max_id = tokenizer.max_id()
        if max_id >= config.n_vocab:
            raise ModelError(f"{tokenizer.source}: token id {max_id} ({tokenizer.id_to_token(max_id)!r}) "
                             f"is outside the model's vocabulary of {config.n_vocab}")

    @property
    def name(self) -> str:
        return self.config.name or self.source

    def n_params(self) -> int:
        return int(sum(np.prod(shape) for shape in expected_shapes(self.config).values()))

    def encode(self, text: str) -> Encoded:
        return self.tokenizer.encode(text, max_length=self.config.n_ctx)

    def checked_ids(self, encoded: Encoded) -> tuple[np.ndarray, np.ndarray]:
        # ids from anywhere (a hand-made Encoded too) must index the model's tables
        ids = np.asarray(encoded.input_ids, dtype=np.int64)
        types = np.asarray(encoded.token_type_ids, dtype=np.int64)
        n_seq = len(ids)
        if ids.ndim != 1 or n_seq == 0:
            raise ModelError(f"input_ids must be a non-empty 1-d array, got shape {ids.shape}")
        if n_seq > self.config.n_ctx:
            raise ModelError(f"{n_seq} tokens is longer than the model's context of {self.config.n_ctx}")
        if ids.min() < 0 or ids.max() >= self.config.n_vocab:
            bad = int(ids[(ids < 0) | (ids >= self.config.n_vocab)][0])
            raise ModelError(f"token id {bad} is outside the model's vocabulary of {self.config.n_vocab}")
        if types.shape != ids.shape:
            raise ModelError(f"token_type_ids has shape {types.shape}, expected {ids.shape}")
        if self.config.n_token_types and (types.min() < 0 or types.max() >= self.config.n_token_types):
            bad = int(types[(types < 0) | (types >= self.config.n_token_types)][0])
            raise ModelError(f"{self.tokenizer.source}: token type id {bad} is outside the model's "
                             f"{self.config.n_token_types} token types")
        return ids, types

    def __call__(self, text: str) -> dict:
        """The untraced forward pass: {"last_hidden_state", "logits"}."""
        ids, types = self.checked_ids(self.encode(text))
        with quiet_floats():
            return forward(self.params, self.config, ids, types)

    def trace(self, text: str, detail_budget: int = DEFAULT_DETAIL_BUDGET,
              detail_layers: tuple[int, ...] = (), interventions: Sequence = (),
              after_layer: Optional[Callable[[int], None]] = None) -> Trace:
        """The forward pass keeping the residual stream; each layer's detail is computed when
        first asked for (`trace.layer(name, i)`), within `detail_budget` bytes. The layers in
        `detail_layers` (the one a view will show first) are recorded by the pass itself.
        `interventions` (core/model/interventions.py) change the pass: ablate heads, remove or
        shuffle positions, swap a row of E, set a head's temperature. `after_layer(i)` is
        called as each layer finishes (a worker's progress; an exception raised there stops
        the pass and propagates)."""
        encoded = self.encode(text)
        return self.trace_encoded(encoded, text, detail_budget, detail_layers, interventions, after_layer)

    def trace_encoded(self, encoded: Encoded, text: str = "",
                      detail_budget: int = DEFAULT_DETAIL_BUDGET,
                      detail_layers: tuple[int, ...] = (), interventions: Sequence = (),
                      after_layer: Optional[Callable[[int], None]] = None,
                      record_budget: Optional[int] = None) -> Trace:
        """`record_budget`: bytes of layer detail the pass itself may record (None: the detail
        budget; retrace gives less while the previous trace still holds its own)."""
        ids, types = self.checked_ids(encoded)
        interventions = interventions_lib.check(interventions, self.config, len(ids))
        detail_layers = tuple(i for i in detail_layers if 0 <= i < self.config.n_layer)
        # every layer's detail that fits the budget is recorded by the pass (visiting a layer
        # then computes nothing); the rest is computed from its stored input when asked for
        n_seq = len(ids)
        recorder = Recorder(per_layer=PASS_KEPT, detail_layers=detail_layers,
                            budget=detail_budget if record_budget is None else min(record_budget, detail_budget),
                            first_estimate=self.config.n_head * n_seq * n_seq * 4,   # the weights
                            derive=self.derived_names, per_head_over=detail_budget)
        # a decoder keeps its keys and values, so the text can grow a token at a time
        cache = KVCache(self.config.n_layer) if self.can_generate and not interventions else None
        with quiet_floats():
            ctx = context(self.config, len(ids), recorder, interventions=interventions)
            forward(self.params, self.config, ids, types, recorder, ctx=ctx, cache=cache, logits=False,
                    after_layer=after_layer)
        arrays, residual = recorder.finish()
        arrays["token_type_ids"] = types.copy()
        arrays["token_type_ids"].flags.writeable = False
        parts = TraceParts(arrays, residual, cache, ctx, None if cache is None else ((0, n_seq),),
                           self._details(recorder, ctx))
        return self.assemble_trace(parts, text=text, tokens=encoded.tokens,
                                   input_ids=ids.copy(), offsets=encoded.offsets.copy(),
                                   special_tokens_mask=encoded.special_tokens_mask.copy(),
                                   truncated=encoded.truncated, detail_budget=detail_budget,
                                   interventions=interventions)

    def intervene(self, trace: Trace, interventions: Sequence,
                  detail_layers: tuple[int, ...] = ()) -> Trace:
        """`trace`'s tokens (as they are: a generated text need not re-tokenize alike) through
        the model again, intervened: the trace to compare with `trace` (a clean one). When every
        intervention acts inside a layer (on heads), the layers before the first of them are
        the clean pass's bit for bit: they are taken from `trace` (its stream and its layers'
        detail, the same arrays) and the pass runs from there."""
        interventions = interventions_lib.check(interventions, self.config, trace.n_seq)
        first = interventions_lib.first_layer(interventions)
        if trace.interventions or not first:
            encoded = Encoded(tokens=trace.tokens, input_ids=trace.input_ids,
                              token_type_ids=trace.arrays["token_type_ids"], offsets=trace.offsets,
                              special_tokens_mask=trace.special_tokens_mask, truncated=trace.truncated)
            return self.trace_encoded(encoded, trace.text, trace.cache.budget, detail_layers, interventions)
        recorder = Recorder(per_layer=PASS_KEPT, detail_layers=tuple(l for l in detail_layers if l >= first),
                            derive=self.derived_names)
        with quiet_floats():
            ctx = context(self.config, trace.n_seq, interventions=interventions)
            x = trace.residual["layer_in"][first]
            for layer in range(first, self.config.n_layer):
                x = block(self.params, self.config, x, ctx, layer, recorder)
            finish(self.params, self.config, x, recorder, logits=False)
        arrays, residual = recorder.finish()
        arrays = {**trace.arrays, **arrays}
        residual = {name: trace.residual[name][:first] + residual[name] for name in residual}
        details = {l: trace.detail(l) for l in detail_layers if l < first}
        details.update(self._details(recorder, ctx))
        compute = self._layer_computer(residual["layer_in"], ctx)

        def compute_layer(layer: int) -> LayerDetail:        # the clean trace's, before `first`
            return trace.detail(layer) if layer < first else compute(layer)

        return self.assemble_trace(TraceParts(arrays, residual, None, ctx, None, details),
                                   compute_layer=compute_layer, text=trace.text,
                                   tokens=trace.tokens, input_ids=trace.input_ids, offsets=trace.offsets,
                                   special_tokens_mask=trace.special_tokens_mask, truncated=trace.truncated,
                                   detail_budget=trace.cache.budget, interventions=interventions)

    def assemble_trace(self, parts: TraceParts, compute_layer=None, **fields) -> Trace:
        """The one place a Trace is made (a pass, an edit, a generation step, a cut): its
        layers' detail computed on demand by the same block function from their stored
        inputs, its mask and head from the same pass. `fields`: the tokens and what the caller
        knows (budget, interventions ...)."""
        arrays, residual, ctx = parts.arrays, parts.residual, parts.ctx
        fields.update(kv_cache=parts.kv_cache, row_blocks=parts.row_blocks,
                      recorded_details=parts.details)
        blocks, n_seq = fields.get("row_blocks"), len(fields["input_ids"])
        if compute_layer is None and blocks not in (None, ((0, n_seq),)):
            # several passes' rows: block by block (row_blocks.py); one pass over every row is
            # the one block function over the stored input, its scores derived when read
            compute_layer = self._block_computer(residual["layer_in"], fields["kv_cache"], ctx, blocks, n_seq)
        if blocks is not None and fields.get("recorded_details"):   # grown or cut by blocks
            spans = row_blocks.spans(blocks, n_seq)
            fields["recorded_details"] = {layer: lean_blocks(detail, self.config, ctx, layer, spans,
                                                             self._sinks(layer))
                                          for layer, detail in fields["recorded_details"].items()}
        return Trace(config=self.config, arrays=arrays, residual=residual,
                     compute_layer=compute_layer or self._layer_computer(residual["layer_in"], ctx),
                     attention_mask=ctx.mask, logits_of=self._logit_computer(arrays, residual), **fields)

    @property
    def derived_names(self) -> tuple[str, ...]:
        """The per-layer arrays a trace derives when read instead of keeping (layer_detail.py)."""
        return ("scores_raw", "scores_uncapped", "scores") if self.config.attn_softcap else ("scores_raw", "scores")

    def _details(self, recorder: Recorder, ctx) -> dict[int, LayerDetail]:
        """The layers a deriving recorder recorded, as LayerDetails reading the layer's context."""
        return {layer: LayerDetail(detail, AttentionRule(self.config, ctx, layer, self._sinks(layer)))
                for layer, detail in recorder.recorded().items()}

    def _sinks(self, layer: int):
        """[n_head] the layer's attention sink logits (gpt-oss), or None: a derived softmax reads them."""
        return sinks_of(self.params, self.config, layer)

    def _layer_computer(self, layer_inputs, ctx) -> Callable[[int], LayerDetail]:
        params, config = self.params, self.config

        def compute_layer(layer: int) -> LayerDetail:
            # the same block function, from the same stored input: bit-identical to recording
            # the layer during the pass
            layer_recorder = Recorder(per_layer=(), detail_layers=(layer,), derive=self.derived_names)
            with quiet_floats():
                block(params, config, layer_inputs[layer], ctx, layer, layer_recorder)
            return self._details(layer_recorder, ctx)[layer]

        return compute_layer

    def _block_computer(self, layer_inputs, kv_cache, ctx, blocks, n_seq) -> Callable[[int], LayerDetail]:
        params, config, spans = self.params, self.config, row_blocks.spans(blocks, n_seq)

        def compute_layer(layer: int) -> LayerDetail:
            # block by block as the passes computed the rows: bit-identical to their recording
            with quiet_floats():
                detail = row_blocks.layer_detail(params, config, layer, layer_inputs[layer], kv_cache,
                                                 blocks, n_seq)
            return lean_blocks(detail, config, ctx, layer, spans, self._sinks(layer))

        return compute_layer

    def _logit_computer(self, arrays, residual) -> Optional["LogitHead"]:
        # the head's input as the pass left it; the vocabulary product for the rows asked
        if not self.config.lm_head:
            return None
        source = arrays.get("head_transform", arrays.get("final_ln_out"))
        return LogitHead(self.params, self.config, residual["layer_out"][-1] if source is None else source)

    # -- generation (extend, retrace, truncate: core/trace/growth.py) ---------------------------
    def extend(self, trace: Trace, token_ids) -> Trace:
        """trace's text followed by `token_ids`, only the new rows computed (growth.extend)."""
        return growth.extend(self, trace, token_ids)

    def retrace(self, previous: Optional[Trace], encoded: Encoded, text: str = "",
                detail_layers: tuple[int, ...] = (),
                after_layer: Optional[Callable[[int], None]] = None,
                detail_budget: Optional[int] = None) -> Trace:
        """The trace of an edited text from `previous`, the rows both begin with taken from it
        (growth.retrace)."""
        return growth.retrace(self, previous, encoded, text, detail_layers, after_layer, detail_budget)

    def truncate(self, trace: Trace, n_seq: int, carry: bool = True) -> Trace:
        """The trace of trace's first n_seq tokens, nothing recomputed (growth.truncate)."""
        return growth.truncate(self, trace, n_seq, carry)

    def shared_rows(self, previous: Optional[Trace], encoded: Encoded) -> int:
        """How many leading positions of `encoded` a trace can take from `previous`
        (growth.shared_rows)."""
        return growth.shared_rows(self, previous, encoded)

    @property
    def can_generate(self) -> bool:
        """A causal model with an output head predicts the next token."""
        return self.config.causal and self.config.lm_head


class LogitHead:
    """A trace's output head: `inputs` [n_seq, d_model] (what the vocabulary product reads, as
    the pass left it); called with rows -> their logits; `product(x)` -> x times the head's
    table without the bias (the head is linear in its input: Trace.logits_change_at)."""

    def __init__(self, params, config: ModelConfig, inputs: np.ndarray) -> None:
        self.params, self.config, self.inputs = params, config, inputs

    def __call__(self, rows) -> np.ndarray:
        with quiet_floats():
            return vocabulary_logits(self.params, self.config, self.inputs[rows])

    def product(self, x: np.ndarray) -> np.ndarray:
        with quiet_floats():
            return head_product(self.params, self.config, x)
