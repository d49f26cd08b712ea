"""One typed validator for every option a user sets: config sections, recipe and head options.

Plain data (parsed YAML, ``key=value`` overrides) is checked and coerced against the type
annotations of a dataclass (:func:`build_dataclass`) or of a constructor's keyword parameters
(:func:`build_kwargs`). Every mistake is a :class:`~mispair.errors.ConfigError` naming the key,
which the command line prints as one line: an unknown key, a wrong type, a value outside a
``Literal`` of choices. YAML 1.1 reads ``1e-3`` as a string, so a float also accepts a string
that parses as one.

Supported annotations: ``bool``, ``int``, ``float``, ``str``, ``Any``, ``Literal[...]``,
``list[T]``, ``dict[str, T]``, unions (``X | None``, ``bool | Literal["auto"]``) and nested
dataclasses.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin, get_type_hints

from mispair.errors import ConfigError


def build_dataclass(cls: type, data: Any, where: str) -> Any:
    """An instance of dataclass ``cls`` from the mapping ``data``; unknown keys and bad values
    are errors naming ``where.key``. Keys not given keep the dataclass defaults, and the
    dataclass's own ``__post_init__`` checks (ranges) still run."""
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    values = _checked(data, {name: hints[name] for name in names}, where)
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def build_kwargs(func: Callable[..., Any], data: Any, where: str, skip: int = 0) -> dict[str, Any]:
    """Checked keyword arguments for ``func`` (e.g. a head's ``__init__``) from ``data``, typed by
    its annotations; the first ``skip`` parameters (after ``self``) are not options."""
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]
    params = [p for p in params[skip:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    hints = get_type_hints(func)
    return _checked(data, {p.name: hints.get(p.name, Any) for p in params}, where)


def coerce(value: Any, hint: Any, key: str) -> Any:
    """``value`` checked against the annotation ``hint`` (see the module docstring)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return copy.deepcopy(value)
    if dataclasses.is_dataclass(hint):
        return build_dataclass(hint, value, key)
    if origin is Literal:
        if value in args and not (isinstance(value, bool) and not any(a is value for a in args)):
            return value
        raise ConfigError(f"{key}: one of {', '.join(map(_show, args))}, got {value!r}")
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, args, key)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        item = args[0] if args else Any
        return [coerce(v, item, f"{key}[{k}]") for k, v in enumerate(value)]
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        item = args[1] if len(args) == 2 else Any
        return {str(k): coerce(v, item, f"{key}.{k}") for k, v in value.items()}
    return _coerce_scalar(value, hint, key)


def _checked(data: Any, hints: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - set(hints))
    if unknown:
        known = ", ".join(sorted(hints)) or "none"
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known: {known})")
    return {name: coerce(value, hints[name], _join(where, name)) for name, value in data.items()}


def _join(where: str, name: str) -> str:
    return name if where == "config" else f"{where}.{name}"


def _coerce_union(value: Any, args: tuple[Any, ...], key: str) -> Any:
    if value is None:
        if type(None) in args:
            return None
        raise ConfigError(f"{key}: a value is required, got null")
    errors = []
    for member in (a for a in args if a is not type(None)):
        try:
            return coerce(value, member, key)
        except ConfigError as exc:
            errors.append(str(exc).removeprefix(f"{key}: "))
    raise ConfigError(f"{key}: {' or '.join(errors)}")


def _coerce_scalar(value: Any, hint: Any, key: str) -> Any:
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float:
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # YAML 1.1 reads "1e-3" (no dot) as a string
                value = float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isnan(value):
                raise ConfigError(f"{key}: expected a number, got nan")
            return float(value)
    if hint is str and isinstance(value, str):
        return value
    name = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{key}: expected {_article(name)}, got {value!r}")


def _article(name: str) -> str:
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}.get(
        name, name
    )


def _show(choice: Any) -> str:
    return str(choice).lower() if isinstance(choice, bool) else str(choice)
