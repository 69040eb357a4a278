"""The numbers the Positions explanation quotes (resources/explanations/positions.md), all read
from the table (results.csv over seeds), the variants' recipe.json and the opened model's
measured interference."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...io.positions_lab import DESCRIPTIONS
from ...state.positions import YourModel, why_no_vector
from ..explain import explanations
from .results import LabTable, cell_text, number

TEMPLATE = "positions"
FIRST_DIMENSIONS = 4


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _spread_text(table: LabTable, variant: str, key: str, kind: str) -> str:
    return cell_text(kind, table.spread(variant, key))


def _list(names: list[str]) -> str:
    return ", ".join(f"*{n}*" for n in names)


def _apart(table: LabTable, key: str) -> list[str]:
    return [v for v, s in table.standings.get(key, {}).items() if s == "apart"]


def _first_rms(interference: dict, key: str) -> str:
    return f"{float(np.mean(interference[key][:FIRST_DIMENSIONS])):.2f}"


def values_and_flags(table: LabTable, selected: Optional[str], your_model: YourModel) -> tuple[dict, dict]:
    variants = table.lab.variants
    any_variant = next(iter(variants.values()))
    recipe = any_variant.recipe
    interference = any_variant.result.get("interference") or next(
        (v.result["interference"] for v in variants.values() if v.result.get("interference")), {})
    steps = sorted({int(r["steps"]) for r in table.lab.rows if r.get("steps") is not None})
    values = {"n_variants": len(table.variants), "seeds": ", ".join(map(str, table.seeds)),
              "n_seeds": len(table.seeds), "steps": " / ".join(f"{s:,}" for s in steps),
              "d_model": recipe.get("d_model", "?"), "n_layer": recipe.get("n_layer", "?"),
              "n_token_types": interference.get("n_tokens", "?"),
              "n_positions": interference.get("n_positions", "?")}
    flags: dict = {}
    best = table.best("heldout_loss")
    values.update(best_loss=best or "—",
                  best_loss_text=_spread_text(table, best, "heldout_loss", "loss") if best else "—",
                  loss_ties=_list(table.tied_with_best("heldout_loss")),
                  loss_apart=_list(_apart(table, "heldout_loss")))
    flags.update(loss_ties=bool(table.tied_with_best("heldout_loss")),
                 loss_apart=bool(_apart(table, "heldout_loss")))
    for key in ("pronoun", "agreement"):
        top = table.best(key)
        values[f"best_{key}"] = f"*{top}* {_spread_text(table, top, key, 'percent')} %" if top else "—"
        values[f"{key}_ties"] = _list(table.tied_with_best(key))
        flags[f"{key}_ties"] = bool(table.tied_with_best(key))
        values[f"{key}_apart"] = ", ".join(f"*{v}* {_spread_text(table, v, key, 'percent')} %"
                                           for v in _apart(table, key))
        flags[f"{key}_apart"] = bool(_apart(table, key))
    if "none" in variants:
        flags["has_none"] = True
        values.update(none_pronoun=_spread_text(table, "none", "pronoun", "percent") + " %",
                      none_agreement=_spread_text(table, "none", "agreement", "percent") + " %",
                      none_probe=_spread_text(table, "none", "probe_r2_last_layer", "r2"))
    for name, prefix in (("sum_sinusoidal", "sin"), ("sum_learned", "learned")):
        measured = variants[name].result.get("interference") if name in variants else None
        if measured and measured.get("p_rank") is not None:
            flags[f"has_{'sinusoidal' if prefix == 'sin' else 'learned'}"] = True
            values.update({f"{prefix}_share": f"{measured['e_variance_in_p_subspace']:.3f}",
                           f"{prefix}_random": f"{measured['random_share']:.3f}",
                           f"{prefix}_cos": f"{measured['mean_abs_cos']:.3f}",
                           f"{prefix}_p_rank": measured["p_rank"],
                           f"{prefix}_rms_p_first": _first_rms(measured, "rms_p"),
                           f"{prefix}_rms_e_first": _first_rms(measured, "rms_e")})
    _selected(values, flags, table, selected)
    _your_model(values, flags, your_model)
    return values, flags


def _selected(values: dict, flags: dict, table: LabTable, selected: Optional[str]) -> None:
    variant = table.lab.variants.get(selected) if selected else None
    if variant is None:
        values.update(selected="—", selected_description="Click a row of the table")
        return
    values.update(selected=selected,
                  selected_description=_sentence(DESCRIPTIONS.get(selected, selected)),
                  selected_loss=_spread_text(table, selected, "heldout_loss", "loss"),
                  selected_accuracy=_spread_text(table, selected, "heldout_accuracy", "percent"),
                  selected_pronoun=_spread_text(table, selected, "pronoun", "percent"),
                  selected_agreement=_spread_text(table, selected, "agreement", "percent"),
                  selected_seed=variant.seed)
    measured = variant.result.get("interference")
    flags["selected_measured"] = measured is not None
    if measured is None:
        position = {"rotary": "rotary", "none": "none"}.get(selected, selected)
        values["selected_why"] = _sentence(why_no_vector(position))
        return
    overlap = measured.get("p_rank") is not None
    flags["selected_overlap"] = overlap
    values.update(selected_share=f"{measured['e_variance_in_p_subspace']:.3f}",
                  selected_cos=f"{measured['mean_abs_cos']:.3f}")
    if overlap:
        cosines = measured["principal_angle_cosines"]
        values.update(selected_random=f"{measured['random_share']:.3f}", selected_p_rank=len(cosines),
                      selected_e_rank=measured.get("e_rank", "?"), selected_d=len(measured["rms_e"]),
                      selected_cosines=f"{max(cosines):.2f} down to {min(cosines):.2f}")


def _your_model(values: dict, flags: dict, model: YourModel) -> None:
    values["model_name"] = f": {model.name}" if model.name else ""
    flags.update(no_model=model.state == "none", model_computing=model.state == "computing",
                 model_without=model.state == "without", model_failed=model.state == "failed",
                 model_measured=model.state == "measured" and model.interference is not None)
    values.update(model_why=_sentence(model.why), model_error=model.why)
    measured = model.interference
    if flags["model_measured"]:
        flags["model_overlap"] = measured.get("p_rank") is not None
        values.update(model_tokens=f"{measured['n_tokens']:,}", model_positions=f"{measured['n_positions']:,}",
                      model_share=number("share", measured["e_variance_in_p_subspace"]),
                      model_random=number("share", measured["random_share"]),
                      model_p_rank=measured.get("p_rank"),
                      model_cos=number("cos", measured["mean_abs_cos"]),
                      model_rms_p_first=_first_rms(measured, "rms_p"),
                      model_rms_e_first=_first_rms(measured, "rms_e"))


def render(table: LabTable, selected: Optional[str], your_model: YourModel) -> str:
    values, flags = values_and_flags(table, selected, your_model)
    return explanations.render(explanations.template(TEMPLATE), values, flags)

