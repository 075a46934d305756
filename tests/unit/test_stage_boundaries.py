"""The stages' boundaries, as docs/ARCHITECTURE.md draws them, read from the sources: the runtime
imports no part of lowering or the pipeline (a cached graph's report is restored from
``solder/reports.py``, its source lines from ``solder/provenance.py``), and the leaf modules
import nothing of Solder's. Lowering still imports ``codegen/scalar_ops.py`` (the target object
that would replace it is not written yet)."""
import ast
from pathlib import Path

import solder

ROOT = Path(solder.__file__).parent


def _solder_imports(path: Path) -> set:
    """The solder modules a file imports, as dotted names, at any depth of the file."""
    package = ".".join(("solder",) + path.relative_to(ROOT).parent.parts)
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.startswith("solder"):
                out.add(name)
                out.update(f"{name}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("solder"))
    return out


def test_the_runtime_imports_neither_lowering_nor_the_pipeline():
    for path in sorted((ROOT / "runtime").glob("*.py")):
        bad = {m for m in _solder_imports(path)
               if m.startswith(("solder.lower", "solder.pipeline", "solder.capture"))}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_the_leaf_modules_import_nothing_of_solder():
    for name in ("reports.py", "provenance.py"):
        assert _solder_imports(ROOT / name) == set(), name

