"""The import rules of docs/architecture.md, enforced on every module of the package.

Imports are read from the source (module level and inside functions), so a lazy import cannot
slip past. Each rule is also tried on a small violating example, so a checker that stopped
seeing imports would fail here instead of passing silently.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sopforge.families import IMPLEMENTED

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "sopforge"
FAMILIES = {p.parent.name for p in (PACKAGE / "families").glob("*/__init__.py")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Absolute names of every module ``source`` imports (relative imports resolved)."""
    found: set[str] = set()
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                prefix = ".".join(base[: len(base) - node.level + 1])
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from pkg import module`
    return found


def all_modules() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p.read_text(encoding="utf-8"), module_name(p), p.name == "__init__.py")
            for p in PACKAGE.rglob("*.py")}


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["sopforge", "families"] and parts[2] in FAMILIES else None


# --------------------------------------------------------------------------- the rules

def stage_touches_store(module: str, imported: set[str]) -> list[str]:
    """Stages are pure: no store, no DuckDB, no Prefect, no orchestration."""
    is_stage = under(module, "sopforge.context.stage") or (
        family_of(module) and ".stages" in module)
    if not is_stage:
        return []
    banned = ("sopforge.store", "duckdb", "prefect", "sopforge.orchestration")
    return sorted(i for i in imported if any(under(i, b) for b in banned))


def family_imports_another(module: str, imported: set[str]) -> list[str]:
    own = family_of(module)
    if own is None:
        return []
    return sorted(i for i in imported if family_of(i) not in (None, own))


def model_imports_checker(module: str, imported: set[str]) -> list[str]:
    """Models are data and parsing: they import no verifier, stage, exporter, sandbox, store or LLM."""
    is_model = under(module, "sopforge.context.model") or (family_of(module) and ".models" in module)
    if not is_model:
        return []
    family = family_of(module)
    banned = ["sopforge.context.checks", "sopforge.context.stage", "sopforge.sandbox", "sopforge.store",
              "sopforge.llm", "sopforge.orchestration"]
    if family:
        banned += [f"sopforge.families.{family}.{layer}" for layer in ("verify", "stages", "export")]
    return sorted(i for i in imported if any(under(i, b) for b in banned))


def infrastructure_imports_family(module: str, imported: set[str]) -> list[str]:
    """Shared infrastructure reaches families only through the registry, by name."""
    if family_of(module) is not None:
        return []
    return sorted(i for i in imported if family_of(i) is not None)


def sdk_outside_llm(module: str, imported: set[str]) -> list[str]:
    """One seam for LLMs (DESIGN principle 3): only sopforge.llm imports the SDKs."""
    if under(module, "sopforge.llm"):
        return []
    return sorted(i for i in imported if under(i, "anthropic") or under(i, "openai"))


RULES = [stage_touches_store, family_imports_another, model_imports_checker, infrastructure_imports_family,
         sdk_outside_llm]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_module_follows_the_rule(rule):
    broken = {module: bad for module, imported in all_modules().items() if (bad := rule(module, imported))}
    assert broken == {}, f"{rule.__name__}: {rule.__doc__ or ''}"


VIOLATIONS = [
    (stage_touches_store, "sopforge.families.sop_tools.stages.sop", "from sopforge.store import Store"),
    (stage_touches_store, "sopforge.context.stage", "def f():\n    import duckdb"),
    (family_imports_another, "sopforge.families.sop_tools.verify.oracle", "from sopforge.families.probe import x"),
    (model_imports_checker, "sopforge.families.sop_tools.models.api_graph",
     "def checks(self):\n    from sopforge.families.sop_tools.verify.api_graph_checks import check_graph"),
    (model_imports_checker, "sopforge.families.sop_tools.models.sop", "from ..verify import sop_checks"),
    (infrastructure_imports_family, "sopforge.review.edits", "from sopforge.families.sop_tools.edits import SOP_EDIT"),
    (sdk_outside_llm, "sopforge.cli.generate", "import anthropic"),
]


@pytest.mark.parametrize("rule,module,source", VIOLATIONS, ids=[v[0].__name__ + ":" + v[1] for v in VIOLATIONS])
def test_each_rule_catches_a_violation(rule, module, source, monkeypatch):
    monkeypatch.setitem(globals(), "FAMILIES", FAMILIES | {"probe"})  # a second family to import
    assert rule(module, imports_of(source, module))


def test_the_registry_and_shared_stages_are_not_families():
    """Infrastructure may import the registry (sopforge.families) and the shared context stage."""
    assert family_of("sopforge.families") is None and family_of("sopforge.context.shared") is None
    assert infrastructure_imports_family("sopforge.theme", {"sopforge.families", "sopforge.context.model"}) == []


def test_every_implemented_family_is_a_package_with_a_declaration():
    for name in IMPLEMENTED:
        assert (PACKAGE / "families" / name / "family.py").is_file(), name


def unlocked_parses(source: str) -> list[int]:
    """Lines calling ``ast.parse`` or ``ast.literal_eval`` directly (not through ``sopforge.pyast``)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"
            and node.func.attr in ("parse", "literal_eval")]


def test_python_is_parsed_only_under_the_lock():
    # CPython 3.11 can fail two threads parsing at once (python/cpython#106905); stages run in threads.
    offenders = {module_name(p): lines for p in PACKAGE.rglob("*.py") if p.name != "pyast.py"
                 if (lines := unlocked_parses(p.read_text(encoding="utf-8")))}
    assert offenders == {}, "parse with sopforge.pyast.parse_python / literal_python"
    assert unlocked_parses("import ast\ntree = ast.parse(code)\nvalue = ast.literal_eval(text)\n") == [2, 3]
