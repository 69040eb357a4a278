"""A loaded encoder–decoder: Seq2SeqConfig + parameters + tokenizer. `trace(source, target)`
runs the encoder once and the decoder over the target so far (teacher forcing); `extend`
appends decoder tokens computing only the new positions (self-attention KV cache, the
memory's cross-attention k/v reused); `generate` steps from decoder_start_token_id to EOS.

The trace is two ordinary lazy Traces (core/trace/trace.py), the encoder's over the source and the
decoder's over the decoder input ids, each layer's detail recomputed on demand by the same
block function from its stored input; Seq2SeqTrace names them as Hugging Face does."""
from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from ..model import ops
from ..model.errors import ModelError
from .growth import joined_rows
from .model import LogitHead
from ..model.params import ParamStore
from ..model.forward import block
from ..model.kv_cache import KVCache
from ..model.interventions import no_positions
from ..model.score_terms import unscaled
from ..model.seq2seq_interventions import split
from ..model.seq2seq import (
    Scoped,
    Seq2SeqConfig,
    cross_context,
    cross_kv,
    decode,
    decoder_block,
    decoder_context,
    encode,
    encoder_context,
    expected_seq2seq_shapes,
    head_logits,
    position_bias)
from ..model.tokenize import Encoded, Tokenizer
from .recorder import Recorder
from .trace import DEFAULT_DETAIL_BUDGET, RESIDUAL_NAMES, LayerDetail, Trace


def check_seq2seq_params(params: Mapping[str, np.ndarray], config: Seq2SeqConfig,
                         source: str) -> Mapping[str, np.ndarray]:
    """Every tensor the pass reads, present with its exact shape; float32, read-only."""
    shapes = expected_seq2seq_shapes(config)
    decoder_weights = [n for n in shapes if n.startswith("decoder.")]
    if decoder_weights and not any(n in params for n in decoder_weights):
        raise ModelError(f"{source}: the config describes an encoder–decoder but there are no "
                         f"decoder weights (e.g. {decoder_weights[0]})")
    checked: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if name not in params:
            raise ModelError(f"{source}: missing tensor {name}")
        found = tuple(params.shape(name)) if isinstance(params, ParamStore) else np.shape(params[name])
        if tuple(found) != shape:
            raise ModelError(f"{source}: tensor {name} has shape {tuple(found)}, expected {shape}")
        if isinstance(params, ParamStore):
            continue
        value = np.asarray(params[name])
        if value.dtype != np.float32:
            value = value.astype(np.float32)
        value = value.view()
        value.flags.writeable = False
        checked[name] = value
    return params if isinstance(params, ParamStore) else checked


class Seq2SeqLogitHead(LogitHead):
    """The decoder's head with T5's d_model^-0.5 and BART/Marian's final_logits_bias."""

    def __init__(self, params, config: Seq2SeqConfig, inputs: np.ndarray) -> None:
        super().__init__(params, config.decoder, inputs)
        self.seq2seq = config

    def __call__(self, rows) -> np.ndarray:
        with ops.quiet_floats():
            return head_logits(self.params, self.seq2seq, self.inputs[rows])

    def product(self, x: np.ndarray) -> np.ndarray:
        with ops.quiet_floats():
            scaled = x * np.float32(self.seq2seq.head_scale)
            return super().product(scaled)


class Seq2SeqTrace:
    """One source and the target so far through an encoder–decoder. `encoder` and `decoder`
    are Traces (their own hidden_states, attentions, layer(name, i)); the decoder's layers
    also hold cross_q, cross_k, cross_v, cross_scores, cross_attn_weights, cross_head_outputs ...
    `notices` says what was changed on the way in (a source cut to the model's positions,
    unknown target tokens)."""

    def __init__(self, config: Seq2SeqConfig, encoder: Trace, decoder: Trace, memory_kv,
                 notices: tuple[str, ...] = (), interventions: tuple = ()) -> None:
        self.config, self.encoder, self.decoder = config, encoder, decoder
        self.memory_kv = memory_kv          # per decoder layer, the memory's (k, v): computed once
        self.notices = notices
        self.interventions = interventions  # core/model/seq2seq_interventions.py: what this pass changes

    def __repr__(self) -> str:
        return f"Seq2SeqTrace({self.config.family}, {self.encoder.n_seq} source, {self.decoder.n_seq} target tokens)"

    @property
    def source_text(self) -> str:
        return self.encoder.text

    @property
    def target_ids(self) -> np.ndarray:
        """The decoder's input ids: decoder_start_token_id, then the target so far."""
        return self.decoder.input_ids

    @property
    def encoder_hidden_states(self) -> np.ndarray:
        return self.encoder.hidden_states

    @property
    def encoder_last_hidden_state(self) -> np.ndarray:
        return self.encoder.hidden_states[-1]

    @property
    def encoder_attentions(self) -> np.ndarray:
        return self.encoder.attentions

    @property
    def decoder_hidden_states(self) -> np.ndarray:
        return self.decoder.hidden_states

    @property
    def decoder_attentions(self) -> np.ndarray:
        return self.decoder.attentions

    @property
    def cross_attentions(self) -> np.ndarray:
        """[n_layer, n_head, n_target, n_source]: each target position's weights over the source."""
        return self.decoder["cross_attn_weights"]

    @property
    def logits(self) -> np.ndarray:
        return self.decoder.logits

    def to_dict(self) -> dict[str, np.ndarray]:
        """Everything, under Hugging Face's names, for an .npz without pickle."""
        out = {f"encoder_{k}": v for k, v in self.encoder.to_dict().items()}
        out.update({f"decoder_{k}": v for k, v in self.decoder.to_dict().items()})
        out.update({"encoder_hidden_states": self.encoder_hidden_states,
                    "decoder_hidden_states": self.decoder_hidden_states,
                    "encoder_attentions": self.encoder_attentions,
                    "decoder_attentions": self.decoder_attentions,
                    "cross_attentions": self.cross_attentions, "logits": self.logits})
        return out


class Seq2SeqModel:
    is_seq2seq = True

    def __init__(self, config: Seq2SeqConfig, params: Mapping[str, np.ndarray],
                 tokenizer: Tokenizer, source: str = "",
                 target_tokenizer: Optional[Tokenizer] = None) -> None:
        where = source or config.name or "model"
        self.params = check_seq2seq_params(params, config, where)
        self.config = config
        self.tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer or tokenizer
        self.source = source
        self.warnings: list[str] = []
        for tok in {id(tokenizer): tokenizer, id(self.target_tokenizer): self.target_tokenizer}.values():
            if tok.max_id() >= config.decoder.n_vocab:
                raise ModelError(f"{tok.source}: token id {tok.max_id()} is outside the model's "
                                 f"vocabulary of {config.decoder.n_vocab}")

    @property
    def name(self) -> str:
        return self.config.name or self.source

    @property
    def can_generate(self) -> bool:
        return True

    def stack_models(self):
        """(encoder, decoder) as one-stack Models over the same parameters (Scoped views): what
        the stage views and exports of one stack read beside the stack's Trace. The decoder
        stand-in's own head lacks T5's scaling and the final_logits_bias, so anything that
        reads logits reads them from the decoder Trace (Seq2SeqLogitHead), never from it."""
        from .model import Model

        encoder = Model(self.config.encoder, Scoped(self.params, "encoder."), self.tokenizer, self.source)
        decoder = Model(self.config.decoder, Scoped(self.params, "decoder."), self.target_tokenizer,
                        self.source)
        # every decoder weight, cross-attention's too (provenance and its Python read them)
        decoder.params = Scoped(self.params, "decoder.")
        return encoder, decoder

    # -- tokens ------------------------------------------------------------------------------
    def encode_source(self, text: str) -> tuple[Encoded, tuple[str, ...]]:
        """-> (the source's tokens, notices). Longer than the encoder's positions: cut, said."""
        if not isinstance(text, str) or not text.strip():
            raise ModelError("empty source: type a sentence to translate")
        n_ctx = self.config.encoder.n_ctx
        encoded = self.tokenizer.encode(text, max_length=n_ctx)
        notices = ((f"the source was cut to the model's {n_ctx} positions",) if encoded.truncated else ())
        return encoded, notices

    def encode_target(self, text: str) -> tuple[np.ndarray, tuple[str, ...]]:
        """The target so far -> its ids without the EOS the tokenizer appends (the decoder
        goes on from them), and notices (unknown pieces)."""
        if not text.strip():
            return np.zeros(0, dtype=np.int64), ()
        encoded = self.target_tokenizer.encode(text, max_length=self.config.decoder.n_ctx - 1)
        ids = np.asarray(encoded.input_ids, dtype=np.int64)
        if len(ids) and ids[-1] == self.config.eos_token_id:
            ids = ids[:-1]
        notices = []
        unk = self.target_tokenizer.token_to_id("<unk>")
        if unk is not None and (ids == unk).any():
            notices.append(f"the target has {int((ids == unk).sum())} piece(s) the vocabulary "
                           f"does not know: read as <unk>")
        if encoded.truncated:
            notices.append(f"the target was cut to the model's {self.config.decoder.n_ctx} positions")
        return ids, tuple(notices)

    # -- the pass -----------------------------------------------------------------------------
    def trace(self, source_text: str, target_text: str = "", target_ids=None,
              detail_budget: int = DEFAULT_DETAIL_BUDGET,
              after_layer: Optional[Callable[[int], None]] = None,
              interventions: tuple = ()) -> Seq2SeqTrace:
        """The encoder over the source, once; the decoder over decoder_start_token_id followed
        by the target (text, or ids given directly). `interventions`: InStack and
        NoSourcePositions items (core/model/seq2seq_interventions.py), acting inside this pass."""
        interventions = tuple(interventions)
        edits = split(interventions, self.config)
        encoded, notices = self.encode_source(source_text)
        if target_ids is None:
            target_ids, target_notices = self.encode_target(target_text)
            notices += target_notices
        target = np.concatenate([[self.config.decoder_start_token_id],
                                 np.asarray(target_ids, dtype=np.int64)]).astype(np.int64)
        self._check_ids(target, self.config.decoder.n_ctx, "target")
        encoder = self._encoder_trace(encoded, source_text, detail_budget, edits["encoder"])
        with ops.quiet_floats():
            memory_kv = cross_kv(self.params, self.config, encoder.hidden_states[-1])
        for k, v in memory_kv:
            k.flags.writeable = v.flags.writeable = False
        decoder = self._decoder_trace(target, memory_kv, encoder, detail_budget, after_layer, edits=edits)
        return Seq2SeqTrace(self.config, encoder, decoder, memory_kv, notices, interventions)

    def encoder_trace(self, source_text: str, detail_budget: int = DEFAULT_DETAIL_BUDGET,
                      interventions: tuple = ()) -> Trace:
        """The encoder's pass over the source alone (Compare on the encoder side)."""
        encoded, _ = self.encode_source(source_text)
        edits = split(interventions, self.config)["encoder"]
        return self._encoder_trace(encoded, source_text, detail_budget, edits)

    def intervene(self, trace: Seq2SeqTrace, interventions) -> Seq2SeqTrace:
        """`trace`'s source and target through the model again, intervened: the trace to
        compare with `trace` (a clean one), position for position."""
        return self.trace(trace.source_text, target_ids=trace.decoder.input_ids[1:],
                          detail_budget=trace.decoder.cache.budget, interventions=interventions)

    def _check_ids(self, ids: np.ndarray, n_ctx: int, what: str) -> None:
        if len(ids) > n_ctx:
            raise ModelError(f"the {what} has {len(ids)} tokens, more than the model's {n_ctx} positions")
        bad = ids[(ids < 0) | (ids >= self.config.decoder.n_vocab)]
        if len(bad):
            raise ModelError(f"{what} token id {int(bad[0])} is outside the model's vocabulary "
                             f"of {self.config.decoder.n_vocab}")

    def _encoder_trace(self, encoded: Encoded, text: str, budget: int, edits: tuple = ()) -> Trace:
        ids = np.asarray(encoded.input_ids, dtype=np.int64)
        recorder = Recorder(per_layer=RESIDUAL_NAMES)
        with ops.quiet_floats():
            ctx = encoder_context(self.params, self.config, len(ids), record=recorder, interventions=edits)
            encode(self.params, self.config, ids, ctx, recorder)
        arrays, residual = recorder.finish()
        arrays["token_type_ids"] = np.zeros_like(ids)
        enc_params, enc_config = Scoped(self.params, "encoder."), self.config.encoder

        def compute_layer(layer: int) -> LayerDetail:
            layer_recorder = Recorder()
            with ops.quiet_floats():
                block(enc_params, enc_config, residual["layer_in"][layer], ctx, layer, layer_recorder)
            return {name: values[0] for name, values in layer_recorder.per_layer.items()}

        return Trace(config=enc_config, text=text, tokens=encoded.tokens, input_ids=ids.copy(),
                     offsets=np.asarray(encoded.offsets, dtype=np.int64).copy(),
                     special_tokens_mask=np.asarray(encoded.special_tokens_mask, bool).copy(),
                     arrays=arrays, residual=residual, compute_layer=compute_layer,
                     truncated=encoded.truncated, detail_budget=budget, interventions=edits,
                     score_terms=self._score_terms("encoder", no_positions(edits)))

    def _score_terms(self, stack: str, no_bias: bool = False) -> Optional[dict]:
        """What the stack's scores are made of where it is not 1/√d_head alone (T5: not
        scaled; its self-attention adds the relative position bias, its cross-attention not)."""
        if self.config.scale_scores and not self.config.relative_buckets:
            return None
        if self.config.scale_scores:
            raise ModelError(f"{self.source}: a scaled model with a position bias is not described")
        has_bias = self.config.relative_buckets and not no_bias
        bias = (f"{stack}_position_bias", "position bias") if has_bias else ("", "")
        return {"": unscaled(*bias), "cross_": unscaled()}

    def _decoder_computer(self, layer_inputs, memory_kv, n_tgt: int, edits: dict):
        dec_params, dec_config = Scoped(self.params, "decoder."), self.config.decoder
        ctx = decoder_context(self.params, self.config, n_tgt, interventions=edits["decoder"])
        cross_ctx = cross_context(self.config, interventions=edits["cross"])

        def compute_layer(layer: int) -> LayerDetail:
            # the same decoder block from the same stored input, over the whole target
            layer_recorder = Recorder()
            with ops.quiet_floats():
                decoder_block(dec_params, dec_config, layer_inputs[layer], ctx, cross_ctx,
                              memory_kv[layer], layer, layer_recorder)
            return {name: values[0] for name, values in layer_recorder.per_layer.items()}

        return compute_layer, ctx

    def _decoder_trace(self, target: np.ndarray, memory_kv, encoder: Trace, budget: int,
                       after_layer=None, previous: Optional[Trace] = None, edits: Optional[dict] = None) -> Trace:
        # previous: the decoder trace target extends (its rows and KV cache are reused); edits:
        # each attention's interventions (core/model/seq2seq_interventions.split)
        edits = edits or {"decoder": (), "cross": ()}
        recorder = Recorder(per_layer=RESIDUAL_NAMES)
        cache = previous.kv_cache.copy() if previous is not None else KVCache(self.config.decoder.n_layer)
        start = cache.n_seq
        with ops.quiet_floats():
            decode(self.params, self.config, target[start:], memory_kv,
                   cross_context(self.config, interventions=edits["cross"]), recorder, cache=cache,
                   logits=False, after_layer=after_layer, interventions=edits["decoder"])
        arrays, residual = recorder.finish()
        arrays["token_type_ids"] = np.zeros(len(target) - start, dtype=np.int64)
        arrays.pop("decoder_position_bias", None)   # the rows of this step; recomputed whole
        if previous is not None:
            arrays = {n: joined_rows(v, arrays[n]) for n, v in previous.arrays.items() if n in arrays}
            residual = {n: tuple(joined_rows(o, new) for o, new in zip(previous.residual[n], residual[n]))
                        for n in previous.residual}
        if self.config.relative_buckets:            # every target row's, for the views
            with ops.quiet_floats():
                bias = position_bias(self.params, self.config, "decoder", len(target), len(target))
            bias.flags.writeable = False
            arrays["decoder_position_bias"] = bias
        compute_layer, ctx = self._decoder_computer(residual["layer_in"], memory_kv, len(target), edits)
        tok = self.target_tokenizer
        tokens = tuple(tok.id_to_token(i) for i in target)
        offsets = np.zeros((len(target), 2), dtype=np.int64)
        special = np.isin(target, [self.config.decoder_start_token_id, self.config.eos_token_id,
                                   self.config.pad_token_id])
        text = "".join(tok.continuation(target[:1], target[1:])) if len(target) > 1 else ""
        source = arrays.get("final_ln_out", residual["layer_out"][-1])
        decoder = Trace(config=self.config.decoder, text=text, tokens=tokens, input_ids=target.copy(),
                     offsets=offsets, special_tokens_mask=special, arrays=arrays, residual=residual,
                     compute_layer=compute_layer,
                     attention_mask=ops.additive_mask(ops.causal_mask(len(target))),
                     detail_budget=budget, kv_cache=cache, computed_rows=len(target) - start,
                     logits_of=Seq2SeqLogitHead(self.params, self.config, source),
                     score_terms=self._score_terms("decoder"), interventions=edits["decoder"])
        decoder.cross_interventions = edits["cross"]   # the cross-attention's (provenance reads them)
        decoder.source_tokens = encoder.tokens          # what the cross-attention's keys are
        return decoder

    def extend(self, trace: Seq2SeqTrace, token_ids) -> Seq2SeqTrace:
        """The trace with `token_ids` appended to the target: only the new positions are
        computed (the self-attention keys and values of the earlier ones are cached, and the
        encoder and the memory's cross-attention k, v are the trace's own)."""
        new_ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        if not len(new_ids):
            return trace
        target = np.concatenate([trace.decoder.input_ids, new_ids])
        self._check_ids(target, self.config.decoder.n_ctx, "target")
        decoder = self._decoder_trace(target, trace.memory_kv, trace.encoder,
                                      trace.decoder.cache.budget, previous=trace.decoder,
                                      edits=split(trace.interventions, self.config))
        return Seq2SeqTrace(self.config, trace.encoder, decoder, trace.memory_kv, trace.notices,
                            trace.interventions)
