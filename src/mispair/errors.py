"""User-facing errors: the CLI prints these as one line, never as a traceback."""

from __future__ import annotations


class MispairError(Exception):
    """A mistake in user input (a file, a config value, an argument).

    The message names the offending file or option and the problem; the CLI prints it as
    ``mispair: error: <message>`` and exits with status 2.
    """


class DataError(MispairError):
    """A data file is missing, malformed or inconsistent."""


class ConfigError(MispairError):
    """A configuration value or command-line override is invalid."""


class DivergedError(MispairError):
    """Training or evaluation met non-finite numbers: a model whose weights diverged."""
