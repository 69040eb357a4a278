"""`export --stages 4,7 --figure NAME`: only the stages and figures asked for are written; a stage
or a figure that does not exist is one `error:` line naming what there is. Every option of
`export` and `generate` has help text."""
from __future__ import annotations

import pytest

from .test_export_cli import run

TEXT = "the bank of the river"


def test_only_the_stages_and_figures_asked_for(tmp_path, capsys):
    out = tmp_path / "figures"
    code, stdout, err = run(capsys, "export", "--text", TEXT, "--out", out, "--stages", "4,softmax")
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names and all(n.startswith(("04-position_addition-", "07-softmax-")) for n in names)
    assert any(n.startswith("04-") for n in names) and any(n.startswith("07-") for n in names)
    one = tmp_path / "one"
    code, stdout, err = run(capsys, "export", "--text", TEXT, "--out", one, "--stages", "7",
                            "--figure", "attention_weights")
    assert code == 0, err
    assert [p.name for p in one.iterdir()] == ["07-softmax-attention_weights-L0H0.png"]


@pytest.mark.parametrize("argv, said", [(["--stages", "4,99"], "no stage '99'"),
                                        (["--stages", "7", "--figure", "nothing"], "attention_weights")])
def test_a_stage_or_figure_that_is_not_there_is_named(tmp_path, capsys, argv, said):
    code, stdout, err = run(capsys, "export", "--text", TEXT, "--out", tmp_path / "x", *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and said in err


@pytest.mark.parametrize("command", ["export", "generate"])
def test_every_option_has_help(capsys, command):
    from transformer_stepper.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    options = sub.choices[command]._actions
    bare = [a.option_strings for a in options if a.option_strings and not a.help]
    assert bare == []
    assert ".gguf" in next(a.help for a in options if "--model" in a.option_strings)
