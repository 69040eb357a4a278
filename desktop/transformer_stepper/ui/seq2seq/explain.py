"""The translator window's explanation panel: each one-stack stage's own text (resources/
explanations/, filled from the view as in the main window) under a note on its part of the
encoder–decoder (the encoder once, the decoder a token at a time, cross-attention between); the
cross-attention stage's text; and the page on Velan, the built-in translator's language, whose
words and examples are read from the corpus generator that wrote its training pairs."""
from __future__ import annotations

from ...core.model.errors import ModelError
from ...core.training import translation_corpus as velan
from ..explain import explanations


def section_note(section: str, trace) -> str:
    encoder, decoder = trace.encoder, trace.decoder
    if section == "Encoder":
        return (f"**Encoder** — runs **once** over the {encoder.n_seq} source tokens, with no mask: "
                f"each source token sees all of them. Its output is what the decoder's "
                f"cross-attention reads at every step.")
    return (f"**Decoder** — runs **one token at a time**, from the start token: {decoder.n_seq} "
            f"position{'s' if decoder.n_seq != 1 else ''} so far, each step adding one. Its "
            f"self-attention is causal (a target word sees only the words before it); its "
            f"cross-attention reads the encoder's output, computed once.")


def stage_markdown(section: str, stage, view, trace) -> str:
    """The markdown for a one-stack stage's view of one side."""
    head = f"## {section}: {stage.number}. {stage.title}\n\n{section_note(section, trace)}\n\n"
    waiting = view.waiting_for()
    if waiting:
        return head + f"*{waiting}*"
    if view.showing_difference:          # A − B: what the figures are, not A's numbers
        return head + view.difference_markdown()
    try:
        values, flags = view.explanation_values()
    except ModelError as exc:
        return head + f"⚠ {exc}"
    return head + explanations.render_stage(stage.key, values, flags)


def cross_attention_markdown(trace, layer: int, head: int) -> str:
    config = trace.config
    return (f"## Decoder: Cross-attention · layer {layer}, head {head}\n\n{section_note('Decoder', trace)}\n\n"
            f"### What happens\nThe decoder's stream asks (q, one row per target position) and the "
            f"**encoder's output** answers (k and v, one row per source token, projected once when the "
            f"source was encoded and reused at every step). The weights, target × source, are the "
            f"**alignment**: which source word each target word reads.\n\n"
            f"### The formula\nweights = softmax(q·kᵀ{'/√d_head' if config.scale_scores else ''}) → "
            f"`[{trace.decoder.n_seq} × {trace.encoder.n_seq}]`; out = weights · v; no causal mask, "
            f"every target position sees the whole source.\n\n"
            f"The line above the plots names the source token the selected target position reads most.")


def velan_markdown(n_vocab: int) -> str:
    """The page on Velan, from the generator's own tables and pairs."""
    rows = []
    for table in (velan.NOUNS, velan.RIVER_NOUNS, velan.MONEY_NOUNS, velan.ADJECTIVES, velan.VERBS,
                  {k: v for k, v in velan.FUNCTION.items() if k != "."}):
        rows += [f"| {english} | {velan_word} |" for english, velan_word in table.items()]
    rows.append(f"| bank | {velan.BANK['river']} (river) / {velan.BANK['money']} (money) |")
    examples = "\n".join(f"- *{pair.source_text}* → **{pair.target_text}**" for pair in example_pairs())
    return explanations.render(explanations.template("velan"), {
        "lexicon_rows": "\n".join(rows), "examples": examples, "n_vocab": n_vocab,
        "river_words": ", ".join(velan.RIVER_NOUNS), "money_words": ", ".join(velan.MONEY_NOUNS)}, {})


def example_pairs(seed: int = 7, count: int = 5) -> list:
    """Pairs the generator writes (the first `count` of a seeded run, and the first with each
    kind of "bank" after them)."""
    pairs = velan.generate(200, seed)
    chosen = pairs[:count]
    for word in velan.BANK.values():
        chosen += [next(p for p in pairs if word in p.target)]
    return chosen
