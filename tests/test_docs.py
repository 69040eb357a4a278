"""The README's set-up commands are the ones CI runs, and every relative link of the README and of
docs/*.md points at a file that exists (and at a heading that exists, when it names one)."""
import re
import shlex
import tomllib
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


# -- the set-up commands -----------------------------------------------------------------------
def setup_commands() -> list[str]:
    """The shell commands of the README's "Set up" section, one per fenced block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Set up\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README.md has no '## Set up' section"
    return [block.strip() for block in re.findall(r"^```bash\n(.*?)^```", section.group(1), re.S | re.M)]


def steps(command: str) -> list[list[str]]:
    return [shlex.split(part) for part in command.split("&&")]


def pip_install_args(words: list[str]) -> list[str]:
    """`.venv/bin/pip install -e .` and `python -m pip install -q -e .` -> ['-e', '.']"""
    at = words.index("install")
    return [w for w in words[at + 1:] if w not in ("-q", "--quiet")]


def is_pip_install(words: list[str]) -> bool:
    return "install" in words and any(w.endswith("pip") for w in words[:words.index("install")])


def pytest_args(words: list[str]) -> list[str]:
    return words[words.index("pytest") + 1:]


def ci_steps() -> list[list[str]]:
    """The commands .ci/run runs in the checkout's venv (before the wheel part)."""
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    checkout = script.split("outside=")[0]
    return [shlex.split(line) for line in checkout.splitlines()
            if line.startswith(".venv/bin/")]


def test_readme_has_the_two_setup_commands():
    commands = setup_commands()
    assert len(commands) == 2, commands
    run, test = (steps(c) for c in commands)
    assert run[0][:3] == ["python3", "-m", "venv"] and test[0][:3] == ["python3", "-m", "venv"]


def test_the_readme_test_command_is_the_one_ci_runs():
    test = steps(setup_commands()[1])
    ci = ci_steps()
    readme_installs = [pip_install_args(s) for s in test if is_pip_install(s)]
    ci_installs = [pip_install_args(s) for s in ci if is_pip_install(s) and s[-1] != "pip"]
    assert readme_installs == ci_installs, (readme_installs, ci_installs)
    readme_pytest = [pytest_args(s) for s in test if "pytest" in s]
    ci_pytest = [pytest_args(s) for s in ci if "pytest" in s]
    assert readme_pytest == ci_pytest, (readme_pytest, ci_pytest)


def test_the_readme_run_command_installs_the_project_and_starts_its_entry_point():
    run = steps(setup_commands()[0])
    installs = [pip_install_args(s) for s in run if is_pip_install(s)]
    assert installs == [["-e", "."]], installs
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    launched = Path(run[-1][0]).name
    assert launched in scripts, f"README launches {launched!r}; pyproject.toml's scripts: {sorted(scripts)}"
    # the test command's venv and install are the run command's plus the test extra
    test = steps(setup_commands()[1])
    assert test[0] == run[0]
    assert [pip_install_args(s) for s in test if is_pip_install(s)] == [["-e", ".[test]"]]


# -- links ---------------------------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed (letters,
    digits, '_', '-' and spaces kept), spaces as '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)      # links: their text
    text = text.replace("`", "").replace("*", "")
    text = text.lower()
    kept = "".join(ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for _, heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def test_slug_follows_github():
    assert slug("Encoder–decoder: translation at inference") == "encoderdecoder-translation-at-inference"
    assert slug("GGUF (llama.cpp, Ollama, LM Studio)") == "gguf-llamacpp-ollama-lm-studio"
    assert slug("What a layer's detail keeps") == "what-a-layers-detail-keeps"
    assert slug("Weights: bf16 and `GGUF`") == "weights-bf16-and-gguf"


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad anchor](#nowhere)\n"
                    "```\n[in code](ignored.md)\n```\n", encoding="utf-8")
    assert links(page) == ["#title", "missing.md", "#nowhere"]
    assert anchors(page) == {"title"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):       # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
