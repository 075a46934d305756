"""The stages' boundaries, as docs/ARCHITECTURE.md draws them, read from the sources: the runtime
imports no part of lowering or the pipeline (a cached graph's report is restored from
``solder/reports.py``, its source lines from ``solder/provenance.py``), lowering imports no
part of codegen (it asks the target object it is handed, ``ir/target.py``), and the leaf
modules import nothing of Solder's."""
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


def test_lowering_imports_no_part_of_codegen():
    for path in sorted((ROOT / "lower").glob("*.py")):
        bad = {m for m in _solder_imports(path) if m.startswith("solder.codegen")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_lowering_asks_its_target(monkeypatch):
    # a target without an op makes its lowering decline to ATen, with the target's name
    import torch
    from solder.codegen.target import TritonTarget, triton_target
    import solder.codegen.target as target_module
    import solder

    class WithoutErf(TritonTarget):
        def can_emit(self, scalar_op):
            return scalar_op != "erf" and super().can_emit(scalar_op)

    monkeypatch.setattr(target_module, "triton_target",
                        lambda: WithoutErf(triton_target().interpreted))
    report = solder.explain(lambda x: torch.erf(x) + 1, torch.randn(8, device="cpu"),
                            options={"cache": False})
    assert "scalar op erf has no implementation in triton" in str(report), str(report)


def test_the_leaf_modules_import_nothing_of_solder():
    for name in ("reports.py", "provenance.py"):
        assert _solder_imports(ROOT / name) == set(), name

