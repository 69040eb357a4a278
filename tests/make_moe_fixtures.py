"""The mixture-of-experts reference fixtures (Mixtral, Qwen3-MoE, Qwen2-MoE, OLMoE, gpt-oss,
DeepSeek-V2):

    python tests/make_moe_fixtures.py [--out DIR] [--only NAME ...]

Each config copies its real checkpoint's config.json fields (named beside it) with the sizes
scaled down (d_model 32, 2-3 layers, 8-16 experts); every parameter is redrawn
(make_fixtures._randomize) and the routers' weights scaled by ROUTER_SCALE, so tokens are sent
to clearly different experts. The script refuses a seed whose routing is fragile: in every
layer and text the k-th and (k+1)-th router logits of every token must differ by more than
MIN_MARGIN (else float32 rounding could pick another expert), every expert must be chosen
by some token, and the tokens of the longest text must choose several different sets.

Besides make_fixtures' hidden states, attentions, logits, greedy generation and head ablation,
hf_outputs/<name>.npz holds per text t, for the MoE layers `moe_layers` (in order):
  router_logits_t [n_moe, n, n_expert]   output_router_logits (checked equal to the hook's)
  expert_ids_t [n_moe, n, k], expert_gates_t [n_moe, n, k]   the router module's top-k indices
                                                             and gate weights (a forward hook;
                                                             largest gate first: DeepSeek-V2's
                                                             router leaves them unsorted)
and for text 0 two interventions made by a forward hook on one layer's router that recomputes
its top-k from its logits: `disabled_*` with expert `disabled_expert` of layer `edit_layer`
given probability 0 (its logit -inf before the softmax); `forced_*` with token `forced_token`
sent to expert `forced_expert` in that layer (it takes the place of the token's k-th choice
when not already chosen; every gate is the softmax probability of its expert, divided by the
k gates' sum where the family normalises). Each as hidden_states, logits and expert_ids.

gpt-oss (gpt_oss_tiny): its router takes the top-k logits, then a softmax over those, and the hook
does the same (the forced expert in the k-th place, the softmax over the k chosen logits); its
experts' gate_up_proj are scaled by EXPERT_SCALE so that the clamp at swiglu_limit acts on
some values (down_proj by 1 / EXPERT_SCALE), and its sinks drawn around SINK_MEAN so that the
sinks take a visible share of every softmax row. The reference uses transformers' eager
attention and eager experts (modeling_gpt_oss.py's own loops).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import make_fixtures as mf

ROUTER_SCALE = 4.0
MIN_MARGIN = 1e-2       # between the k-th and (k+1)-th router logits
EXPERT_SCALE = 3.0      # gpt-oss: gate and up pre-activations reach the clamp (swiglu_limit 7)
SINK_MEAN, SINK_SPREAD = 3.0, 1.5
ATTEMPTS = 20           # seeds tried in turn (SEED + offset + 1000·attempt) until one routes robustly
SEED = mf.SEED + 400


def moe_configs():
    """name -> (HF class, config class, config fields, tokenizer factory, seed, norm_topk)."""
    return {
        # mistralai/Mixtral-8x7B-v0.1: 8 experts, top 2 (normalised), GQA 4:1 -> 2:1,
        # rope_theta 1e6, rms_norm_eps 1e-5, no sliding window, untied, <s>
        "mixtral_tiny": ("MixtralForCausalLM", "MixtralConfig",
                         dict(num_local_experts=8, num_experts_per_tok=2, rope_theta=1e6,
                              rms_norm_eps=1e-5, sliding_window=None, tie_word_embeddings=False,
                              router_jitter_noise=0.0),
                         mf.sentencepiece_tokenizer, 1, True),
        # Qwen/Qwen3-30B-A3B: 128 experts top 8 -> 16 top 4, norm_topk_prob true,
        # moe_intermediate_size 768 -> 16, head_dim 128 -> 16, GQA 8:1 -> 2:1, rope 1e6,
        # decoder_sparse_step 1; mlp_only_layers [] -> [1] so a dense layer is exercised
        "qwen3_moe_tiny": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig",
                           dict(num_hidden_layers=3, num_experts=16, num_experts_per_tok=4,
                                norm_topk_prob=True, moe_intermediate_size=16, head_dim=16,
                                rope_theta=1e6, decoder_sparse_step=1, mlp_only_layers=[1],
                                use_sliding_window=False, sliding_window=None, attention_bias=False,
                                tie_word_embeddings=False),
                           lambda: mf.bytelevel_tokenizer(("<|endoftext|>",)), 2, True),
        # Qwen/Qwen1.5-MoE-A2.7B: 60 experts top 4 -> 12 top 4, norm_topk_prob false, shared
        # expert 5632 -> 48 with its sigmoid gate, moe_intermediate_size 1408 -> 16, q/k/v
        # biases, 16 heads = 16 K/V heads -> 4 = 4, rope 1e6
        "qwen2_moe_tiny": ("Qwen2MoeForCausalLM", "Qwen2MoeConfig",
                           dict(num_experts=12, num_experts_per_tok=4, norm_topk_prob=False,
                                moe_intermediate_size=16, shared_expert_intermediate_size=48,
                                num_key_value_heads=4, rope_theta=1e6, decoder_sparse_step=1,
                                mlp_only_layers=[], use_sliding_window=False, qkv_bias=True,
                                tie_word_embeddings=False),
                           lambda: mf.bytelevel_tokenizer(("<|endoftext|>",)), 3, False),
        # allenai/OLMoE-1B-7B-0924: 64 experts top 8 -> 16 top 4, intermediate_size 1024 -> 16
        # (an expert), q/k norms over the whole projections, rope 1e4, rms_norm_eps 1e-5,
        # clip_qkv null, norm_topk_prob false, 16 heads = 16 K/V heads -> 4 = 4, untied
        "olmoe_tiny": ("OlmoeForCausalLM", "OlmoeConfig",
                       dict(num_experts=16, num_experts_per_tok=4, norm_topk_prob=False,
                            intermediate_size=16, num_key_value_heads=4, rope_theta=10000.0,
                            rms_norm_eps=1e-5, clip_qkv=None, attention_bias=False,
                            tie_word_embeddings=False),
                       lambda: mf.bytelevel_tokenizer(("<|endoftext|>",)), 4, False),
        # openai/gpt-oss-20b: 32 experts top 4 (kept), router with bias, top-k then softmax,
        # clamped SwiGLU (swiglu_limit 7.0, alpha 1.702) with biases, attention sinks,
        # attention_bias true, layer_types sliding/full alternating (24 layers -> 2),
        # sliding_window 128 -> 6, hidden_size 2880 -> 32, intermediate_size 2880 -> 32 (rows of
        # MXFP4 blocks of 32 in the GGUF fixture),
        # head_dim 64 -> 16, 64 heads : 8 K/V heads -> 8 : 1, rope_theta 150000 with yarn
        # (factor 32, beta_fast 32, beta_slow 1, original 4096, truncate false), rms_norm_eps
        # 1e-5, max_position_embeddings 131072, untied (the Hub's experts are MXFP4: here float32)
        "gpt_oss_tiny": ("GptOssForCausalLM", "GptOssConfig",
                         dict(num_local_experts=32, num_experts_per_tok=4, intermediate_size=32,
                              head_dim=16, num_attention_heads=8, num_key_value_heads=1,
                              sliding_window=6, layer_types=["sliding_attention", "full_attention"],
                              attention_bias=True, swiglu_limit=7.0, rms_norm_eps=1e-5,
                              max_position_embeddings=131072, tie_word_embeddings=False,
                              router_aux_loss_coef=0.9, output_router_logits=False,
                              rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                               "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0,
                                               "original_max_position_embeddings": 4096}),
                         lambda: mf.bytelevel_tokenizer(("<|endoftext|>",)), 5, True),
        # deepseek-ai/DeepSeek-V2-Lite, field by field: q_lora_rank null (one q_proj), kv_lora_rank
        # 512 -> 16, qk_nope_head_dim 128 -> 16, qk_rope_head_dim 64 -> 8, v_head_dim 128 -> 16
        # (q/k heads 24 wide, values 16), 16 heads = 16 K/V heads -> 4 = 4, 27 layers -> 3 with
        # first_k_dense_replace 1 (layer 0 dense, intermediate_size 10944 -> 64), 64 routed
        # experts top 6 -> 16 top 4, moe_intermediate_size 1408 -> 16, n_shared_experts 2,
        # moe_layer_freq 1, routed_scaling_factor 1.0, topk_method greedy, n_group 1, topk_group
        # 1, norm_topk_prob false, scoring_func softmax, yarn factor 40 from 4096 with mscale =
        # mscale_all_dim = 0.707, beta 32/1, rope_theta 1e4, max_position_embeddings 163840,
        # rms_norm_eps 1e-6, untied, no biases; <｜begin▁of▁sentence｜> first
        "deepseek_v2_tiny": ("DeepseekV2ForCausalLM", "DeepseekV2Config",
                             dict(num_hidden_layers=3, num_key_value_heads=4, q_lora_rank=None,
                                  kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                                  n_routed_experts=16, num_experts_per_tok=4, moe_intermediate_size=16,
                                  n_shared_experts=2, first_k_dense_replace=1, moe_layer_freq=1,
                                  routed_scaling_factor=1.0, topk_method="greedy", n_group=1, topk_group=1,
                                  norm_topk_prob=False, scoring_func="softmax", rope_theta=10000.0,
                                  max_position_embeddings=163840, rms_norm_eps=1e-6,
                                  rope_scaling=dict(DEEPSEEK_YARN), attention_bias=False, mlp_bias=False,
                                  tie_word_embeddings=False),
                             lambda: mf.bytelevel_tokenizer((DEEPSEEK_BOS, DEEPSEEK_EOS), template=DEEPSEEK_BOS),
                             5, False),
    }


DEEPSEEK_BOS, DEEPSEEK_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
# DeepSeek-V2-Lite's rope_scaling as its config.json has it
DEEPSEEK_YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707,
                 "original_max_position_embeddings": 4096, "type": "yarn"}


def hub_spelling(path: Path) -> None:
    """The experts' count as the released config.json spells it: transformers 5 saves Qwen3-MoE's
    num_experts as num_local_experts (its attribute_map)."""
    config = json.loads(path.read_text())
    if config["model_type"] in ("qwen3_moe", "qwen2_moe", "olmoe") and "num_local_experts" in config:
        config["num_experts"] = config.pop("num_local_experts")
    if config["model_type"] == "gpt_oss":      # openai/gpt-oss-20b's config.json: rope_scaling and a
        rope = dict(config.pop("rope_parameters"))     # top-level rope_theta, no swiglu_alpha
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = rope
        config.pop("swiglu_alpha")
    if config["model_type"] == "deepseek_v2":     # DeepSeek-V2-Lite's spelling: rope_scaling and
        for key in ("head_dim", "qk_head_dim", "rope_parameters"):    # rope_theta, no head_dims
            config.pop(key, None)
        config.update(rope_scaling=dict(DEEPSEEK_YARN), rope_theta=10000)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _routers(model):
    """(layer index, router module) of every MoE layer, in order."""
    out = []
    for i, layer in enumerate(model.model.layers):
        block = getattr(layer, "block_sparse_moe", None) or layer.mlp
        router = getattr(block, "gate", None) or getattr(block, "router", None)    # gpt-oss: router
        if router is not None and hasattr(block, "experts"):
            out.append((i, router))
    return out


def _is_gpt_oss(model) -> bool:
    return model.config.model_type == "gpt_oss"


def _shape_gpt_oss(model, seed: int) -> None:
    """gpt-oss: experts whose pre-activations reach the clamp, sinks with a visible share."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.experts.gate_up_proj.mul_(EXPERT_SCALE)
            layer.mlp.experts.down_proj.div_(EXPERT_SCALE)
            sinks = layer.self_attn.sinks
            sinks.copy_(SINK_MEAN + SINK_SPREAD * torch.randn(sinks.shape, generator=gen))


def _scale_routers(model) -> None:
    import torch

    with torch.no_grad():
        for _, router in _routers(model):
            router.weight.mul_(ROUTER_SCALE)


def routing(model, ids: np.ndarray) -> dict[str, np.ndarray]:
    """router_logits, expert_ids, expert_gates [n_moe, n, ...] of one text (hooks on the routers)."""
    import torch

    seen: list = []
    handles = [router.register_forward_hook(lambda m, i, o: seen.append(o)) for _, router in _routers(model)]
    try:
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None], output_router_logits=True)
    finally:
        for handle in handles:
            handle.remove()
    logits = np.stack([o[0].numpy() for o in seen])
    reported = np.stack([r.numpy() for r in out.router_logits])
    if not np.array_equal(logits, reported):
        raise SystemExit("output_router_logits differs from the router's own logits")
    ids = np.stack([o[2].numpy() for o in seen]).astype(np.int64)
    gates = np.stack([o[1].numpy() for o in seen])
    # DeepSeek-V2's router takes its top-k unsorted (torch.topk sorted=False): largest gate first
    order = np.argsort(-gates, axis=-1, kind="stable")
    return {"router_logits": logits, "expert_ids": np.take_along_axis(ids, order, axis=-1),
            "expert_gates": np.take_along_axis(gates, order, axis=-1)}


def check_routing(name: str, arrays: dict, n_expert: int, k: int) -> None:
    """Refuse fragile routing (near-ties at the k-th place), unused experts, uniform choices."""
    used = set()
    for key in [key for key in arrays if key.startswith("router_logits_")]:
        ordered = -np.sort(-arrays[key], axis=-1)
        margin = (ordered[..., k - 1] - ordered[..., k]).min()
        if margin <= MIN_MARGIN:
            raise Fragile(f"{name}: {key} has a near-tie at the top-{k} boundary ({margin:.2e})")
        used |= set(np.unique(arrays[key.replace("router_logits", "expert_ids")]).tolist())
    if used != set(range(n_expert)):
        raise Fragile(f"{name}: experts {sorted(set(range(n_expert)) - used)} are never chosen")
    sets = {tuple(sorted(row)) for row in arrays["expert_ids_2"][0]}
    if len(sets) < 4:
        raise Fragile(f"{name}: the longest text's tokens choose only {len(sets)} expert sets")


class Fragile(Exception):
    """This seed's routing is not a robust reference."""


def edited_top_k(logits, k: int, normalize: bool, disabled=None, forced=None):
    """The router's top-k recomputed from its logits with one edit (see the module's doc)."""
    import torch

    masked = logits.clone()
    if disabled is not None:
        masked[:, disabled] = float("-inf")
    probs = torch.softmax(masked, dim=-1, dtype=torch.float)
    top, index = torch.topk(probs, k, dim=-1)
    if forced is not None:
        token, expert = forced
        if expert not in index[token].tolist():
            index[token, -1] = expert
            top[token, -1] = probs[token, expert]
    if normalize:
        top = top / top.sum(dim=-1, keepdim=True)
    return logits, top.to(logits.dtype), index


def edited_top_k_logits(logits, k: int, disabled=None, forced=None):
    """gpt-oss's router (top-k of the logits, then their softmax) recomputed with one edit."""
    import torch

    masked = logits.clone()
    if disabled is not None:
        masked[:, disabled] = float("-inf")
    top, index = torch.topk(masked, k, dim=-1)
    if forced is not None:
        token, expert = forced
        if expert not in index[token].tolist():
            index[token, -1] = expert
            top = torch.gather(masked, 1, index)
    return logits, torch.softmax(top, dim=1, dtype=top.dtype), index


def intervened(model, ids, layer_position: int, normalize: bool, **edit) -> dict[str, np.ndarray]:
    """hidden states, logits and every MoE layer's expert ids with one router edited."""
    import torch

    _, router = _routers(model)[layer_position]

    def hook(module, inputs, output):
        logits = output[0]
        if _is_gpt_oss(model):
            return edited_top_k_logits(logits, module.top_k, **edit)
        return edited_top_k(logits, module.top_k, normalize, **edit)

    handle = router.register_forward_hook(hook)
    try:
        ids_after = routing(model, ids)["expert_ids"]
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(ids)[None], output_hidden_states=True)
    finally:
        handle.remove()
    return {"hidden_states": torch.stack(out.hidden_states)[:, 0].numpy(), "logits": out.logits[0].numpy(),
            "expert_ids": ids_after}


def load(folder: Path, class_name: str):
    """The model as transformers reads it back, eager attention (gpt-oss: eager experts too)."""
    import torch
    import transformers

    extra = {"experts_implementation": "eager"} if class_name == "GptOssForCausalLM" else {}
    return getattr(transformers, class_name).from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32, **extra).eval()


def make_moe(name: str, out: Path) -> None:
    for attempt in range(ATTEMPTS):
        try:
            return make_moe_seeded(name, out, attempt)
        except Fragile as exc:
            print(f"{exc}; next seed", file=sys.stderr)
    raise SystemExit(f"{name}: no robust routing in {ATTEMPTS} seeds")


def make_moe_seeded(name: str, out: Path, attempt: int) -> None:
    class_name, config_name, fields, make_tokenizer, seed, normalize = moe_configs()[name]
    tok = make_tokenizer()
    fields = mf._decoder_sizes(tok.get_vocab_size(with_added_tokens=True), **fields)
    folder = mf.write_random_model(out / name, class_name, config_name, fields, tok,
                                   SEED + seed + 1000 * attempt)
    model = load(folder, class_name)
    _scale_routers(model)
    if _is_gpt_oss(model):
        _shape_gpt_oss(model, SEED + seed + 1000 * attempt)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "generation_config.json").unlink(missing_ok=True)
    hub_spelling(folder / "config.json")        # the reference: the folder as transformers reads it
    model = load(folder, class_name)
    arrays = mf.hf_outputs(model, folder / "tokenizer.json", mf.TEXTS)
    moe_layers = [i for i, _ in _routers(model)]
    for t in range(len(mf.TEXTS)):
        for key, value in routing(model, arrays[f"input_ids_{t}"]).items():
            arrays[f"{key}_{t}"] = value
    n_expert = fields.get("num_local_experts") or fields.get("num_experts") or fields["n_routed_experts"]
    k = fields["num_experts_per_tok"]
    check_routing(name, arrays, n_expert, k)
    arrays.update(mf.decoder_references(model, arrays["input_ids_0"]))
    edit_layer = len(moe_layers) - 1
    ids0 = arrays["input_ids_0"]
    first = arrays["expert_ids_0"][edit_layer]
    disabled = int(np.bincount(first.ravel(), minlength=n_expert).argmax())   # the busiest expert
    token = int(arrays["expert_gates_0"][edit_layer].max(axis=1).argmin())     # its gates the most spread
    ranked = np.argsort(-arrays["router_logits_0"][edit_layer][token], kind="stable")
    forced = int(ranked[k])             # the token's best expert not chosen: a visible change
    for prefix, edit in (("disabled", dict(disabled=disabled)), ("forced", dict(forced=(token, forced)))):
        for key, value in intervened(model, ids0, edit_layer, normalize, **edit).items():
            arrays[f"{prefix}_{key}_0"] = value
    arrays.update(moe_layers=np.array(moe_layers), edit_layer=np.array(moe_layers[edit_layer]),
                  disabled_expert=np.array(disabled), forced_token=np.array(token),
                  forced_expert=np.array(forced))
    mf.save_npz(out / "hf_outputs" / f"{name}.npz", {**arrays, **mf.provenance()})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=mf.FIXTURES)
    parser.add_argument("--only", nargs="+", metavar="NAME")
    args = parser.parse_args(argv)

    import torch
    import transformers

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in moe_configs():
        if args.only and name not in args.only:
            continue
        make_moe(name, args.out)
        print(f"wrote {args.out / name} and hf_outputs/{name}.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
