"""Which column of a table holds what: the image, the caption, a pair id and a split, and the
columns of precomputed image and text vectors (never guessed: named or absent).

A column named on the command line (``--image-column``) or in the config (``data.image_column``)
is taken as given; otherwise the usual names are tried (:data:`USUAL_NAMES`). None found, or two
usual names found for one role, is a one-line error listing the columns the table has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mispair.errors import DataError

if TYPE_CHECKING:
    from mispair.config import DataConfig

USUAL_NAMES: dict[str, tuple[str, ...]] = {
    "image": ("image", "file_name", "image_path", "filepath", "file", "path", "img", "jpg", "png", "webp"),
    "caption": ("caption", "text", "alt_text", "title", "sentence", "description", "txt"),
    "id": ("pair_id", "id"),
    "split": ("split",),
}
"""Names tried, in order, for each role when no column is named (``id`` and ``split`` are
optional)."""

EMBEDDING_ROLES = ("image_embedding", "text_embedding")
OPTIONS = {role: f"--{role.replace('_', '-')}-column" for role in (*USUAL_NAMES, *EMBEDDING_ROLES)}


@dataclass(frozen=True)
class Columns:
    """The columns named by the user (None: detect)."""

    image: str | None = None
    caption: str | None = None
    id: str | None = None
    split: str | None = None
    image_embedding: str | None = None
    text_embedding: str | None = None

    def resolve(self, found: Sequence[str], where: str) -> Columns:
        """The column of every role among ``found`` (``id`` and ``split`` None when absent; the
        image None when absent and its vectors are given)."""
        names = {role: self._resolve(role, found, where) for role in (*USUAL_NAMES, *EMBEDDING_ROLES)}
        return Columns(**names)

    def _resolve(self, role: str, found: Sequence[str], where: str) -> str | None:
        given = getattr(self, role)
        listed = ", ".join(map(str, found)) or "none"
        if given is not None:
            if given not in found:
                raise DataError(f"{where}: no column {given!r} ({OPTIONS[role]}); columns found: {listed}")
            return given
        taken = {self.image_embedding, self.text_embedding}  # named for vectors: never a usual name
        usual = [name for name in USUAL_NAMES.get(role, ()) if name in found and name not in taken]
        if len(usual) > 1:
            raise DataError(
                f"{where}: columns {', '.join(usual)} could each be the {role}; name one "
                f"with {OPTIONS[role]} (columns found: {listed})"
            )
        required = ("caption",) if self.image_embedding else ("image", "caption")
        if not usual and role in required:
            raise DataError(
                f"{where}: no {role} column (tried {', '.join(USUAL_NAMES[role])}); name it "
                f"with {OPTIONS[role]} (columns found: {listed})"
            )
        return usual[0] if usual else None


def columns_of(data: DataConfig) -> Columns:
    """The columns the config (or the command line) names."""
    return Columns(
        data.image_column,
        data.caption_column,
        data.id_column,
        data.split_column,
        data.image_embedding_column,
        data.text_embedding_column,
    )
