"""Package exports resolved on first use, so `import memjax.rl` costs no JAX import.

    __getattr__, __dir__ = lazy_exports(__name__, {"group_advantages": "memjax.rl.advantages"})
    __all__ = [...]   # the same names

Each name maps to the module that defines it (an attribute of the same name), or to
"module:attribute" when the package exports it under another name; a module itself is
"module:" (the part after the colon empty).
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str]):
    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].partition(":")
        value = importlib.import_module(module)
        if attribute or not exports[name].endswith(":"):
            value = getattr(value, attribute or name)
        return value

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
