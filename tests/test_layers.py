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
    {"data", "ot"},
    {"nn", "losses"},
    {"encoding", "division"},
    {"methods"},
    {"engine"},
    {"notebook"},
    {"search"},
    {"audit"},
    {"api"},
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
