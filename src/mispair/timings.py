"""Wall-clock seconds per part of a long command (the audit's ``summary.json`` ``timings``)."""

from __future__ import annotations

import time


class Timings:
    """A lap timer: :meth:`lap` gives the seconds since the previous lap (or the start) to a named
    part, so every second goes to exactly one part and the parts add up to the total.

    Example:
        >>> timings = Timings()
        >>> timings.lap("reading")
        >>> sorted(timings.to_dict())
        ['reading', 'total']
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = self._last = time.perf_counter()

    def lap(self, part: str) -> None:
        """Add the time since the previous lap to ``part`` (a part may be lapped several times)."""
        now = time.perf_counter()
        self.seconds[part] = self.seconds.get(part, 0.0) + now - self._last
        self._last = now

    def to_dict(self) -> dict[str, float]:
        """``{part: seconds, ..., "total": seconds since the start}``, to the millisecond."""
        parts = {part: round(seconds, 3) for part, seconds in self.seconds.items()}
        return {**parts, "total": round(time.perf_counter() - self._started, 3)}
