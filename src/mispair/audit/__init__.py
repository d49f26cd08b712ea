"""``mispair audit``: the pairs of a collection ranked by how likely they are mismatched."""

from mispair.audit.result import AuditResult
from mispair.audit.run import audit_collection

__all__ = ["AuditResult", "audit_collection"]
