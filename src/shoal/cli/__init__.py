"""shoal: run tiled simulations, balance their load, and predict placements by replay.

Every subcommand has ``--help``; errors print one line and exit 2. Each command is a module of
this package (the live viewer's is :mod:`shoal.view.command`) with ``add_parser(subparsers)``
and ``main(args)``.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ShoalError
from ..log import LEVELS, configure
from ..plugins import import_modules
from ..version import __version__
from . import (
    calibrate,
    compare,
    convert_checkpoint,
    demo,
    export,
    export_lbaf,
    export_tit,
    lif,
    replay,
    report,
    run,
    sampi,
    scenarios,
    study,
    sweep,
    validate,
)

# In the order ``shoal --help`` lists them.
COMMANDS = [scenarios, run, compare, report, replay, sweep, export, export_tit, export_lbaf, calibrate, validate, sampi,
            study, lif, convert_checkpoint, demo]


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each flag's default where it has one worth showing."""

    def _get_help_string(self, action):
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list)
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _logging_flags(p: argparse.ArgumentParser, defaults: bool) -> None:
    """-v/-q/--log-level/--debug and --import, before or after the command (``shoal -v run ...`` or
    ``shoal run -v ...``)."""
    d = {} if defaults else {"default": argparse.SUPPRESS}
    g = p.add_argument_group("logging")
    g.add_argument("-v", "--verbose", action="store_true", help="say more (debug messages)", **d)
    g.add_argument("-q", "--quiet", action="store_true", help="say only warnings and errors, no progress", **d)
    g.add_argument("--log-level", choices=LEVELS, help="the level of messages shown (default info)", **d)
    g.add_argument("--debug", action="store_true", help="show the traceback of an error", **d)
    p.add_argument("--import", action="append", dest="imports", metavar="MODULE",
                   help="import this Python module first: it may register apps and placement policies of your own "
                        "(repeatable; the current folder is on the path)", **d)


def build_parser() -> argparse.ArgumentParser:
    """The ``shoal`` command's parser: every command of :data:`COMMANDS` and ``view``."""
    ap = argparse.ArgumentParser(prog="shoal", description=__doc__.splitlines()[0] if __doc__ else None,
                                 formatter_class=_HelpFormatter)
    ap.add_argument("--version", action="version", version=f"shoal {__version__}")
    _logging_flags(ap, defaults=True)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parent = argparse.ArgumentParser(add_help=False)
    _logging_flags(parent, defaults=False)
    add_parser = sub.add_parser

    def add(name, **kw):
        return add_parser(name, parents=[parent], formatter_class=_HelpFormatter, **kw)

    sub.add_parser = add  # every command takes the logging flags and shows defaults
    for command in COMMANDS:
        command.add_parser(sub)
    from ..view.command import add_parser as add_view_parser

    add_view_parser(sub)  # shoal view: its handler is shoal.view.command.main
    return ap


def main(argv: list[str] | None = None) -> int:
    """The ``shoal`` command: one line and exit 2 for bad input, 130 when interrupted, 1 for a
    bug (with ``--debug``: its traceback)."""
    args = build_parser().parse_args(argv)
    level = args.log_level or ("debug" if args.verbose else "warning" if args.quiet else "info")
    configure(level)
    try:
        import_modules(getattr(args, "imports", None) or ())
        return args.func(args)
    except ShoalError as exc:
        return _fail(args, f"error: {_first_line(exc)}", 2)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130)
    except MemoryError:
        return _fail(args, "error: out of memory (make the run smaller)", 2)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(args, f"error: cannot use{where}: {exc.strerror or _first_line(exc)}", 2)
    except Exception as exc:  # a bug: one line unless asked for more
        return _fail(args, f"error: unexpected {type(exc).__name__}: {_first_line(exc)} (run with --debug for the "
                           "traceback)", 1)


def _fail(args, line: str, code: int) -> int:
    if args.debug:
        import traceback

        traceback.print_exc()
    print(line, file=sys.stderr)
    return code


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
