"""Options declared once, as dataclass fields: name, type, default, help and check.

A dataclass whose fields are made by :func:`option` is the one declaration of a set of options.
Everything else is made from it: the command line's flags (:func:`add_flags`), a function's
keyword signature and the *Parameters* section of its docstring (:func:`document`), typed
assignment from the command line or Python (:func:`assign`) and the checks (:func:`check`).
A value keeps its type all the way: a flag's text is parsed once, where argparse reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import textwrap
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import ShoalError

OPTION = "shoal.option"  # the key of a field's metadata


@dataclass(frozen=True)
class Option:
    """What a field declares besides its name, type and default.

    Attributes
    ----------
    help : str
        One line: what the option sets. It is the flag's help and the parameter's description.
    flag : bool or str
        Whether the command line has a flag for it (``--name-with-dashes``), or that flag's name.
    metavar : str, optional
        The flag's value as its help shows it.
    parse : callable, optional
        ``parse(text) -> value`` for the flag (default: the field's type; a ShoalError becomes a
        usage error).
    check : callable, optional
        ``check(value) -> str | None``: what is wrong with a value (``"must be positive"``), or
        None; or a ShoalError of its own. Checked whatever the value came from.
    group : str, optional
        Flags of one group exclude each other.
    unset : str, optional
        What leaving it unset means, for the help (``"the scenario's"``).
    """

    help: str
    flag: bool | str = True
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    check: Callable[[Any], str | None] | None = None
    group: str | None = None
    unset: str | None = None


def option(default: Any = dataclasses.MISSING, help: str = "", *, default_factory: Any = dataclasses.MISSING,  # noqa: A002
           **declared: Any) -> Any:
    """A dataclass field declaring an option (see :class:`Option` for the keywords).

    Parameters
    ----------
    default : object
        The value when it is not set.
    help : str
        One line: what it sets.
    default_factory : callable, optional
        Makes the default instead (for lists).
    **declared
        The other attributes of :class:`Option`.
    """
    return field(default=default, default_factory=default_factory, metadata={OPTION: Option(help, **declared)})


def declared(cls: type) -> list[tuple[dataclasses.Field, Option]]:
    """The fields of the dataclass ``cls`` that declare options, in order."""
    return [(f, f.metadata[OPTION]) for f in dataclasses.fields(cls) if OPTION in f.metadata]


# ----- checks ----------------------------------------------------------------------------------------
def at_least(low: int | float) -> Callable[[Any], str | None]:
    """A check: the value, when set, is a number ``>= low`` (``"must be positive"`` for 1)."""
    def check(value):
        if value is not None and value < low:
            return "must be positive" if low == 1 else f"must be >= {low}"
        return None

    return check


def both(*checks: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """A check made of several: the first complaint."""
    def check(value):
        return next((c for c in (c(value) for c in checks) if c), None)

    return check


def check(obj: Any, where: str | None = None) -> None:
    """Run every declared check of the dataclass instance ``obj``.

    Parameters
    ----------
    obj : dataclass instance
        Its fields' values.
    where : str, optional
        How its fields are named in messages: ``"run."`` gives ``run.steps``; by default a field
        with a flag is named by its flag (``--view-every``), one without by its name.

    Raises
    ------
    ShoalError
        Naming the first field whose check fails, what is wrong and its value.
    """
    for f, opt in declared(type(obj)):
        if opt.check is None:
            continue
        value = getattr(obj, f.name)
        name = f"{where}{f.name}" if where is not None else flag_name(f, opt) if opt.flag else f.name
        try:
            complaint = opt.check(value)
        except ShoalError as exc:  # a check that says it all itself
            raise ShoalError(f"{name}: {exc}") from None
        if complaint:
            raise ShoalError(f"{name} {complaint}, got {value!r}")


# ----- typed values ----------------------------------------------------------------------------------
def assign(obj: Any, name: str, value: Any, where: str) -> None:
    """Set the field ``name`` of the dataclass instance ``obj`` to ``value``, checked against the
    field's type (element by element for lists; integers widen to float; floats must be finite;
    booleans are not numbers); ``where`` names it in the error."""
    setattr(obj, name, typed(typing.get_type_hints(type(obj))[name], value, where))


def typed(hint: Any, value: Any, where: str) -> Any:
    """``value`` checked against the type ``hint`` (see :func:`assign`), named ``where`` in the error."""
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin is typing.Annotated:
        return typed(args[0], value, where)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return typed(inner[0], value, where)
        for a in inner:  # the first member the value is (int | str: 3 stays an int)
            try:
                return typed(a, value, where)
            except ShoalError:
                continue
        names = " or ".join(getattr(a, "__name__", str(a)) for a in inner)
        raise ShoalError(f"{where} expects {names}, got {value!r}")
    if origin is typing.Any or not isinstance(origin, type):
        return value
    name = getattr(origin, "__name__", str(origin))
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ShoalError(f"{where} expects list, got {value!r}")
        item = args[0] if args else typing.Any
        return origin(typed(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, bool) and origin is not bool:
        raise ShoalError(f"{where} expects {name}, got {value!r}")
    if origin is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, origin):
        raise ShoalError(f"{where} expects {name}, got {value!r}")
    if origin is float and not math.isfinite(value):
        raise ShoalError(f"{where} must be a finite number, got {value!r}")
    return value


# ----- the command line ------------------------------------------------------------------------------
def flag_name(f: dataclasses.Field, opt: Option) -> str:
    """The flag of the declared field ``f`` whose declaration is ``opt``: the flag ``opt`` names,
    or ``--`` and the field's name with dashes."""
    return opt.flag if isinstance(opt.flag, str) else "--" + f.name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, cls: type, groups: dict | None = None,
              only: Iterable[str] | None = None) -> dict:
    """Add to ``parser`` a flag for every declared field of ``cls`` that has one (or those named
    in ``only``).

    Every flag's default is None (or an empty list for repeatable ones): unset, so that what the
    scenario or the function says wins. Returns the mutually exclusive groups by name, shared
    with the caller through ``groups`` (to add flags of its own to one).
    """
    groups = {} if groups is None else groups
    hints = typing.get_type_hints(cls)
    wanted = set(only) if only is not None else None
    for f, opt in declared(cls):
        if not opt.flag or (wanted is not None and f.name not in wanted):
            continue
        target = parser
        if opt.group is not None:
            if opt.group not in groups:
                groups[opt.group] = parser.add_mutually_exclusive_group()
            target = groups[opt.group]
        help_text = opt.help + (f" (default: {opt.unset})" if opt.unset else "")
        kind = _base(hints[f.name])
        kw: dict[str, Any] = {"dest": f.name, "help": help_text.replace("%", "%%")}  # argparse formats help
        if kind is bool:
            kw.update(action="store_true", default=None)
        elif kind in (list, tuple):
            kw.update(action="append", default=None, metavar=opt.metavar)
        else:
            kw.update(type=_parser(opt.parse or kind), default=None, metavar=opt.metavar)
        target.add_argument(flag_name(f, opt), **kw)
    return groups


def values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The flags of ``cls``'s fields that were given on the command line, by field name."""
    out = {}
    for f, opt in declared(cls):
        value = getattr(args, f.name, None)
        if opt.flag and value is not None:
            out[f.name] = tuple(value) if isinstance(value, list) else value
    return out


def _base(hint: Any) -> Any:
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _base(inner[0]) if len(inner) == 1 else str
    return origin


def _parser(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` for argparse: a ShoalError or ValueError is a usage error (argparse says it)."""
    def run(text: str) -> Any:
        try:
            return parse(text)
        except (ShoalError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc) or f"invalid value {text!r}") from None

    run.__name__ = getattr(parse, "__name__", "value")
    return run


# ----- Python's view ---------------------------------------------------------------------------------
def keywords(*classes: type, exclude: Iterable[str] = ()) -> list[inspect.Parameter]:
    """Keyword-only parameters, one per declared field of ``classes`` (but ``exclude``), with
    their type and default: for a function's ``__signature__``. A field whose default is a
    value of the scenario (``unset``) has the default None."""
    params, skip = [], set(exclude)
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f, opt in declared(cls):
            if f.name in skip:
                continue
            default = None if opt.unset else _default(f)
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=hints[f.name] if not opt.unset else hints[f.name] | None))
            skip.add(f.name)
    return params


def parameters_section(*classes: type, exclude: Iterable[str] = (), first: str = "") -> str:
    """A NumPy-style *Parameters* section naming every declared field of ``classes`` (but
    ``exclude``), after the ``first`` entries written by hand."""
    lines, skip = ["Parameters", "----------"], set(exclude)
    if first:
        lines += first.strip("\n").splitlines()
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f, opt in declared(cls):
            if f.name in skip:
                continue
            skip.add(f.name)
            kind = _type_text(hints[f.name])
            lines.append(f"{f.name} : {kind}, optional")
            default = "the scenario's" if opt.unset == "the scenario's" else (opt.unset or repr(_default(f)))
            lines += textwrap.wrap(f"{_sentence(opt.help)} Default: {default}.", 92, initial_indent="    ",
                                   subsequent_indent="    ")
    return "\n".join(lines)


def document(function: Callable, parameters: list[inspect.Parameter], section: str, leading: int = 1) -> None:
    """Give ``function`` the signature of its first ``leading`` parameters followed by
    ``parameters``, and put ``section`` where its docstring says ``{parameters}``."""
    own = list(inspect.signature(function).parameters.values())[:leading]
    function.__signature__ = inspect.Signature(own + parameters,
                                               return_annotation=inspect.signature(function).return_annotation)
    indent = " " * 4
    function.__doc__ = (function.__doc__ or "").replace(
        "{parameters}", section.replace("\n", "\n" + indent))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return inspect.Parameter.empty


def _type_text(hint: Any) -> str:
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return f"sequence of {_type_text(args[0])}" if args else "sequence"
    return getattr(origin, "__name__", str(origin))


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[0].upper() + text[1:] if text else text) + ("" if text.endswith(".") else ".")
