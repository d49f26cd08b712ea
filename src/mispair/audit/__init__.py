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

        return _no_folder_left(audit_collection)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_folder_left(run: Any) -> Any:
    """``run`` (called with the collection and the output folder first), removing the output
    folder again when the call made it and stopped at a mistake in the input (a
    :class:`~mispair.errors.MispairError`): a refused collection leaves no half-written run
    folder. An interrupted audit keeps its folder, to resume."""
    import functools
    import shutil
    from pathlib import Path

    from mispair.errors import MispairError

    @functools.wraps(run)
    def audit_collection(root: Any, out: Any, *args: Any, **kwargs: Any) -> Any:
        made = not Path(out).exists()
        try:
            return run(root, out, *args, **kwargs)
        except MispairError:
            if made and Path(out).is_dir() and not Path(out).is_symlink():
                shutil.rmtree(out, ignore_errors=True)
            raise

    return audit_collection


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from mispair.audit.notebook import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
