"""Documentation stays inside the repository and true: code cites docs/ARCHITECTURE.md by an existing section,
nothing points at design notes or paths outside the checkout, every path ARCHITECTURE.md names exists, and its
import table and rules (§3) are those of the tree."""

from __future__ import annotations

import ast
import functools
import pathlib
import re
import tomllib

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


# -- docs/ARCHITECTURE.md against the tree ------------------------------------------------------------------------
PACKAGE = ROOT / "pykbroker"
# Files that a path in the document names but that exist only at run time.
RUNTIME_FILES = {"meta.properties"}


def _section(title_prefix: str) -> str:
    text = ARCHITECTURE.read_text()
    start = text.index(f"\n## {title_prefix}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _top_level(dotted: str) -> str:
    """``pykbroker.log.unified_log`` -> ``log``; ``pykbroker.kafka`` -> ``kafka``."""
    return dotted.split(".")[1]


@functools.cache
def _imports_of(path: pathlib.Path) -> frozenset[str]:
    """Every module that ``path`` imports (at any depth: lazy imports included), relative imports resolved."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                module = ".".join(base.relative_to(ROOT).parts)
                module = f"{module}.{node.module}" if node.module else module
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)  # ``from pykbroker.clients import producer``
    return frozenset(out)


def _units() -> list[str]:
    """The packages and top-level modules of pykbroker, as the document names them (``kafka.py``...)."""
    return sorted(
        p.name
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")
    )


def _unit_files(unit: str) -> list[pathlib.Path]:
    p = PACKAGE / unit
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


@functools.cache
def _edges() -> dict[str, set[str]]:
    """``{unit: {unit it imports}}`` over the whole package (``kafka.py`` counts as ``kafka``)."""
    units = {u.removesuffix(".py") for u in _units()}
    edges: dict[str, set[str]] = {}
    for unit in _units():
        name = unit.removesuffix(".py")
        edges[name] = {
            _top_level(m)
            for f in _unit_files(unit)
            for m in _imports_of(f)
            if m.startswith("pykbroker.") and _top_level(m) in units and _top_level(m) != name
        }
    return edges


def _named_units(cell: str, units: set[str]) -> set[str]:
    """The units named in backticks in a table cell: `log`, `config.group_config`, `config/group_config.py`,
    `kafka.py`; any other backticked text (class names) is ignored."""
    named = set()
    for token in re.findall(r"`([^`]+)`", cell):
        head = re.split(r"[./]", token.removesuffix(".py"), maxsplit=1)[0]
        if head in units:
            named.add(head)
    return named


def test_architecture_paths_exist():
    """Every file or directory path that the document names in backticks exists (a bare file name somewhere in
    the tree, a path from the repository root or from ``pykbroker/``)."""
    text = ARCHITECTURE.read_text()
    tokens = set(re.findall(r"`([A-Za-z0-9_.][\w./-]*(?:\.py|\.md|\.toml|\.cfg|\.properties|/))`", text))
    assert len(tokens) > 100
    names = {p.name for d in ("pykbroker", "conf", "bin", "tests", "docs") for p in (ROOT / d).rglob("*")}
    missing = [
        t
        for t in sorted(tokens)
        if not ((ROOT / t).exists() or (PACKAGE / t).exists() or ("/" not in t and t in names | RUNTIME_FILES))
    ]
    assert missing == []


def test_architecture_import_table_is_every_edge():
    """§3's table lists, for each package, exactly the packages it imports (lazy imports included)."""
    section = _section("3. ")
    edges = _edges()
    units = set(edges)
    table = {}
    for row in re.findall(r"^\| `([\w.]+)` \| (.*) \|$", section, re.M):
        unit, cell = row[0].removesuffix(".py"), row[1]
        table[unit] = set() if cell.strip() == "nothing" else _named_units(cell, units) - {unit}
    assert set(table) == units, "every package has a row"
    assert {u: sorted(edges[u]) for u in units} == {u: sorted(table[u]) for u in units}


def test_architecture_import_rules_hold():
    """§3's sentences "`a` and `b` never import `c` or `d`", "`p` ... imports nothing of ours" and "only `f`
    imports x" hold in the tree."""
    section = " ".join(_section("3. ").split())
    edges = _edges()
    rules = re.findall(r"\(((?:`[\w.]+`(?:, | and )?)+) never imports? ((?:`[\w.]+`(?:, | or )?)+)\)", section)
    assert len(rules) >= 3
    for subjects, objects in rules:
        for subject in re.findall(r"`([\w.]+)`", subjects):
            for obj in re.findall(r"`([\w.]+)`", objects):
                offenders = [
                    str(f.relative_to(ROOT))
                    for f in _unit_files(subject)
                    if any(m == f"pykbroker.{obj}" or m.startswith(f"pykbroker.{obj}.") for m in _imports_of(f))
                ]
                assert offenders == [], f"{subject} imports {obj}"
    nothing = re.findall(r"`(\w+)` (?:is [\w/-]+ and )?imports nothing of ours", section)
    assert nothing == ["protocol"]
    assert all(edges[u] == set() for u in nothing)
    for path, module in re.findall(r"only `([\w/.]+)` imports (\w+)", section):
        importers = [
            str(f.relative_to(PACKAGE))
            for f in PACKAGE.rglob("*.py")
            if any(m == module or m.startswith(module + ".") for m in _imports_of(f))
        ]
        assert importers == [path]


def test_architecture_layers_are_the_contract():
    """The layers that §3 states are those of the import-linter contract in pyproject.toml."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    stated = re.search(r"one\s+layers contract \(([^)]*)\)", _section("3. ")).group(1)
    stated_layers = [" | ".join(re.findall(r"`?(\w+)", part)) for part in " ".join(stated.split()).split(" > ")]
    assert stated_layers == [layer.replace("pykbroker.", "") for layer in layers]
