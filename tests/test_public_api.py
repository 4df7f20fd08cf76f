"""The public API is what the README shows: every name it imports from ember is in the
``__all__`` of the module it comes from, and each such module declares one."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_imports() -> dict[str, set[str]]:
    """``module -> names`` of every ``from ember... import ...`` in the README's Python blocks."""
    found: dict[str, set[str]] = {}
    for block in re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ember"):
                found.setdefault(str(node.module), set()).update(a.name for a in node.names)
    return found


def test_the_readme_imports_something_from_ember() -> None:
    assert {"ember.shadow.library", "ember.memory.library"} <= set(readme_imports())


def test_every_name_the_readme_imports_is_in_its_modules_all() -> None:
    for module, names in readme_imports().items():
        public = getattr(importlib.import_module(module), "__all__", None)
        assert public is not None, f"{module} is imported by the README but has no __all__"
        missing = sorted(names - set(public))
        assert not missing, f"the README imports {missing} from {module}: list them in __all__"


def test_every_name_in_an_all_exists() -> None:
    for module in ["ember", *readme_imports()]:
        mod = importlib.import_module(module)
        absent = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert not absent, f"{module}.__all__ names {absent}, which it does not define"
