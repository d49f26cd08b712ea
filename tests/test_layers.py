"""The layers of docs/architecture.md: every import in ``src/mispair`` runs down a layer or stays
in its own package (no arrow back up, none across a layer, hence no circle)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mispair"
LAYERS = [
    {"errors", "options", "registry", "atomic", "progress", "config", "seeds", "pretrained", "distributed"}
    | {
        "limits",
        "safe_io",
        "safe_parse",
        "sanity",
        "output_folder",
        "version",
        "timings",
        "onnx_runtime",
        "ann",
    },
    {"data", "ot", "estimate"},
    {"nn", "losses"},
    {"encoding", "division"},
    {"methods"},
    {"engine"},
    {"notebook"},
    {"search"},
    {"audit"},
    {"api"},
    {"exchange"},
    {"cli", "testing"},
    {"__main__", "__init__"},
]
LAYER = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """The package or top-level module of ``mispair.<unit>...`` (``__init__`` for ``mispair``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[str]:
    """Every ``mispair`` module ``path`` imports, at the top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mispair":
            names = [f".{a.name}" for a in node.names] if node.module == "mispair" else [""]
            found += [f"{node.module}{n}" for n in names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "mispair"]
    return found


def arrows() -> list[tuple[str, str, str]]:
    """``(file, from unit, to unit)`` of every import between two units."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        here = parts[0]
        for module in imports(path):
            there = unit_of(module)
            if there != here:
                out.append((str(path.relative_to(SRC)), here, there))
    return out


def test_every_unit_has_a_layer():
    units = {p.relative_to(SRC).with_suffix("").parts[0] for p in SRC.rglob("*.py")}
    assert units <= LAYER.keys(), f"add to LAYERS (and docs/architecture.md): {sorted(units - LAYER.keys())}"


def test_imports_run_down_the_layers():
    wrong = [
        (f, a, b) for f, a, b in arrows() if LAYER[b] > LAYER[a] or (LAYER[b] == LAYER[a] and LAYER[a] > 0)
    ]
    assert not wrong, "\n".join(
        f"{f}: {a} (layer {LAYER[a]}) imports {b} (layer {LAYER[b]})" for f, a, b in wrong
    )


@pytest.mark.parametrize(("source", "expected"), [("from mispair.engine.run import x", "engine")])
def test_the_check_sees_an_arrow_back_up(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(f"def f():\n    {source}\n")
    assert [unit_of(m) for m in imports(path)] == [expected]


def file_of(module: str, root: Path = SRC) -> Path | None:
    """The file of ``mispair.<...>`` under ``root`` (a module, or a package's ``__init__.py``)."""
    path = root.joinpath(*module.split(".")[1:])
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return path / "__init__.py" if (path / "__init__.py").is_file() else None


def imported_files(path: Path, root: Path = SRC) -> set[Path]:
    """The files of ``root`` that ``path`` imports, at the top or inside a function: a name
    imported from a package is its submodule when it is one, else the package's ``__init__.py``."""
    found = set()
    for module in imports(path):
        package = module.rpartition(".")[0]
        target = file_of(module, root) or (file_of(package, root) if package else None)
        if target is not None:
            found.add(target)
    return found


def circles_inside_packages(root: Path = SRC) -> list[tuple[str, list[str]]]:
    """``(package, its units in one circle)`` for every package below ``root``: a package's units
    are the modules and sub-folders right inside it (its ``__init__.py``, the package's face that
    only hands names on, left out); an import between two of them is an arrow, and no arrows may
    run round in a circle (so each package's units stand on floors, none importing up)."""
    graph = {path: imported_files(path, root) for path in root.rglob("*.py")}
    packages = [p.parent for p in root.rglob("__init__.py") if p.parent != root]
    found = []
    for package in sorted(packages):
        arrows: dict[str, set[str]] = {}
        for source, targets in graph.items():
            for target in targets:
                if package in source.parents and package in target.parents:
                    a, b = (p.relative_to(package).parts[0].removesuffix(".py") for p in (source, target))
                    if a != b and "__init__" not in (a, b):
                        arrows.setdefault(a, set()).add(b)
        for circle in _circles(arrows):
            found.append((str(package.relative_to(root)), sorted(circle)))
    return found


def _circles(arrows: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected sets of more than one unit (each unit's reach, compared)."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in arrows.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {unit: reach(unit) for unit in arrows}
    circles = {frozenset({u} | {v for v in reached[u] if u in reached.get(v, ())}) for u in arrows}
    return [set(c) for c in circles if len(c) > 1]


def test_no_import_runs_back_up_inside_a_package():
    circles = circles_inside_packages()
    assert not circles, "\n".join(
        f"{package}: {' <-> '.join(units)} import each other" for package, units in circles
    )


def test_the_audit_imports_no_recipe_and_no_export():
    """The audit is an application of a trained run: it reads the library below ``engine/``'s run,
    never a recipe's internals (``methods/``) nor ``--export-pairs`` (``engine/export.py``)."""
    wrong = [
        (str(path.relative_to(SRC)), module)
        for path in sorted((SRC / "audit").rglob("*.py"))
        for module in imports(path)
        if module.startswith(("mispair.methods", "mispair.engine.export"))
    ]
    assert not wrong, wrong


def test_the_check_sees_a_late_import_running_back_up_inside_a_package(tmp_path):
    root = tmp_path / "mispair"
    for name in ("data/__init__.py", "data/sources/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "data" / "features.py").write_text("def f():\n    from mispair.data.sources import images\n")
    (root / "data" / "sources" / "images.py").write_text("")
    (root / "data" / "sources" / "tux.py").write_text("from mispair.data.features import f\n")
    assert circles_inside_packages(root) == [("data", ["features", "sources"])]
