"""``mispair audit``: the pairs of a collection ranked by how likely they are mismatched.

This package is also the notebook function: ``mispair.audit(source, **options)`` calls
:func:`mispair.audit.notebook.audit` (the module is callable), while ``mispair.audit.audit_collection``,
``mispair.audit.AuditResult`` and the submodules stay where they are.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["AuditResult", "audit_collection"]


def __getattr__(name: str) -> Any:  # the engine is imported on first use, not with the package
    if name == "AuditResult":
        from mispair.audit.result import AuditResult

        return AuditResult
    if name == "audit_collection":
        from mispair.audit.run import audit_collection

        return audit_collection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from mispair.audit.notebook import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
