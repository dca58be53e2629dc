"""Planner options: one frozen dataclass per planner, passed as a record or as keywords.

Every planner keeps its options in a frozen dataclass whose defaults are the
best setting, each field with its one-line help in ``metadata["help"]``, and
hangs that default instance on its planner function as ``plan.options`` so
that the CLI and the notebooks can list the fields, their defaults and their
help. `parse_options` turns what a planner got into that dataclass: either
the record itself (``options=GreedyOptions(...)``) or keyword arguments
applied to the defaults; it names the planner and its valid options when one
is unknown (a `TypeError`, like any bad keyword).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import MISSING, Field, field, fields, replace
from functools import partial
from typing import Any, TypeVar

from memplan.errors import renamed_keyword

Options = TypeVar("Options")


def option(default: Any = MISSING, help: str = "", *, default_factory: Any = MISSING) -> Any:
    """A dataclass field with its one-line ``help`` in its metadata (the CLI's help text)."""
    return field(default=default, default_factory=default_factory, metadata={"help": help})


def option_help(of: Field) -> str:
    """The one-line help of an option field (empty when it has none)."""
    return of.metadata.get("help", "")


def options_record(cls: type[Options], options: Options | None, fields: dict[str, Any]
                   ) -> Options:
    """A call's options record: ``options`` as given, or a ``cls`` built from its ``fields``
    as keywords (`TypeError` for both, for a record of another type, or for a field ``cls``
    lacks). `memplan.solve` and `memplan.sweep` take their settings this way."""
    if options is None:
        return cls(**fields)
    if not isinstance(options, cls):
        raise TypeError(f"options must be a {cls.__name__}, not {type(options).__name__}")
    if fields:
        raise TypeError(f"give options={cls.__name__}(...) or its fields as keywords "
                        f"({', '.join(sorted(fields))}), not both")
    return options


def parse_options(planner: str, defaults: Options, options: dict[str, Any]) -> Options:
    """The record in ``options["options"]``, or ``defaults`` with the keyword ``options``
    applied; `TypeError` for an option the record lacks, a record of another type, or a
    record given together with keyword options."""
    record = options.get("options")
    if record is not None:
        if not isinstance(record, type(defaults)):
            raise TypeError(f"planner {planner!r} takes options={type(defaults).__name__}"
                            f"(...), not {type(record).__name__}")
        if len(options) > 1:
            raise TypeError(f"planner {planner!r}: give options={type(defaults).__name__}"
                            f"(...) or keyword options, not both")
        return record
    valid = [f.name for f in fields(defaults)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"planner {planner!r} has no option {', '.join(map(repr, unknown))}; "
                        f"valid options: {', '.join(valid) or 'none'}")
    return replace(defaults, **options)


def renamed_fields(**names: str):
    """Class decorator for an options record: each old field name (``workers="threads"``) is
    still taken, and read, for one release, with a one-line `DeprecationWarning`."""

    def wrap(cls):
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **given):
            for old, new in names.items():
                if old in given:
                    given[new] = renamed_keyword(old, given.pop(old), new, given.get(new),
                                                 where=cls.__name__)
            init(self, *args, **given)

        cls.__init__ = __init__
        for old, new in names.items():
            setattr(cls, old, property(partial(_read_renamed, old=f"{cls.__name__}.{old}",
                                               new=new),
                                       doc=f"The old name of ``{new}`` (deprecated)."))
        return cls

    return wrap


def _read_renamed(record, *, old: str, new: str):
    warnings.warn(f"{old} is deprecated, use {new}", DeprecationWarning, stacklevel=3)
    return getattr(record, new)


