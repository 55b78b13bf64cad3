"""Documentation stays inside the repository: code cites docs/ARCHITECTURE.md by an existing section, and
nothing points at design notes or paths outside the checkout."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
SOURCES = [
    p
    for d in ("pykbroker", "tests", "bin", "spark", "bench", "conf", "docs")
    for p in (ROOT / d).rglob("*")
    if p.is_file()
    and p.suffix in ("", ".py", ".md", ".properties", ".toml", ".cfg")
    and "__pycache__" not in p.parts
    and p != pathlib.Path(__file__).resolve()
] + [ROOT / "README.md"]


def _text(p: pathlib.Path) -> str:
    try:
        return p.read_text()
    except UnicodeDecodeError:
        return ""


def test_architecture_citations_name_existing_sections():
    sections = set(re.findall(r"^## (\d+)\. ", ARCHITECTURE.read_text(), re.M))
    assert {"1", "2", "3", "4", "5", "6", "11"} <= sections
    cited = {
        (str(p.relative_to(ROOT)), n) for p in SOURCES for n in re.findall(r"docs/ARCHITECTURE\.md §(\d+)", _text(p))
    }
    assert cited, "code cites the architecture document"
    assert [c for c in cited if c[1] not in sections] == []


def test_nothing_points_outside_the_repository():
    pattern = re.compile(r"DESIGN\.md|/work/|\bseeds/|\bshared/")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in SOURCES
        for i, line in enumerate(_text(p).splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_readme_points_to_the_architecture_document():
    assert "docs/ARCHITECTURE.md" in (ROOT / "README.md").read_text()
