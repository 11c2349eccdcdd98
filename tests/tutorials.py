"""Run a tutorial as its reader would, and set what it printed beside what the page shows.

A page is read in order. Its ``bash`` blocks' commands run in a fresh working folder
(``shoal ...`` as ``python -m shoal ...``, ``mpiexec -n N shoal ...`` on N ranks), its
``python`` blocks run one after another in one interpreter started in that folder (one
namespace, as in a reader's session), and the fenced block without a language right after a
command or Python block is what that block printed (standard output; messages on standard
error are not shown). HTML comments before a block, which the site does not show, say more:

- ``<!-- file: NAME -->``: the next block is a file the reader saves as NAME (not run);
- ``<!-- not run: REASON -->``: the next block is shown, not run, for the reason given;
- ``<!-- output: exact -->``: the next output block's decimals are compared too.

What was printed is compared strictly where it does not depend on the machine: every word,
integer and line, the tables' columns and rows. Two things are free: a decimal number (a
timing, a prediction fitted from one) matches any decimal number, and ``…`` in a shown line
matches any text (an integer count that depends on the machine, the working folder's path).
Rows of a rich table (``│ ... │``) match as a set, with the cell under a ``rank`` heading free:
a near-tie may order them differently. Claims a reader would rely on are ``python`` blocks on
the page that assert them from the run's files.

``python tests/tutorials.py --update docs/tutorials/PAGE.md`` runs the page and rewrites its
output blocks with what was printed (keeping each ``…`` of a line that still matches it), so
every number shown comes from one real run of the current code; a page whose commands fail or
whose claims no longer hold is left as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from test_docs import hooks, shell_commands

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
# What every tutorial says of its numbers (the test checks it is there).
NOTICE = "The outputs on this page were printed by its commands on one machine"
COLUMNS = "120"  # the terminal width the pages' tables were printed at
TIMEOUT_S = 900  # a hung command, not a slow one: nothing on a page takes near this long

# A fenced block, or a line that the site replaces by a README block (docs/hooks.py).
PIECE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```[ \t]*$|^<!-- readme-code: (?P<readme>.+?) -->$",
                   re.S | re.M)
MARKER = re.compile(r"<!-- (file|not run|output): *(.+?) *-->")
NUMBER = r"[-+]?\d[\d,]*\.\d+(?:e[-+]?\d+)?"
TOKEN = re.compile(rf"(?P<any>…)|(?P<number>{NUMBER})|(?P<integer>\d+)|(?P<space>\s+)|(?P<rule>(?P<r>[━─═])(?P=r)*)"
                   r"|(?P<char>.)")
BODY, HEADER = "│", "┃"


@dataclass
class Block:
    """A fenced block of a page: its language, text, markers and where it sits in the page."""

    lang: str
    code: str
    start: int  # offsets of its text (inside the fences) in the page; -1 for a README block
    end: int
    markers: dict[str, str] = field(default_factory=dict)
    follows: Block | None = None  # the block it comes right after (nothing but blank lines between)

    @property
    def name(self) -> str:
        """How a message names the block: its language and first line."""
        first = (self.code.strip().splitlines() or [""])[0]
        return f"```{self.lang} block {first[:60]!r}"


def blocks(text: str) -> list[Block]:
    """The page's blocks in order, README inclusions resolved as the site resolves them."""
    out, last, previous = [], 0, None
    for m in PIECE.finditer(text):
        gap = text[last:m.start()]
        markers = {k: v for k, v in MARKER.findall(gap)}
        adjacent = previous if previous is not None and not gap.strip() else None
        if m.group("readme"):
            b = Block("python", hooks().readme_code(m.group("readme")), -1, -1, markers, adjacent)
        else:
            b = Block(m.group("lang"), m.group("code"), m.start("code"), m.end("code"), markers, adjacent)
        out.append(b)
        last, previous = m.end(), b
    return out


def is_output(b: Block) -> bool:
    """A block without a language right after a block that runs: what that block printed."""
    return b.lang in ("", "text") and b.follows is not None and b.follows.lang in ("bash", "python") \
        and "file" not in b.follows.markers


# ----- comparing ----------------------------------------------------------------------------------
def pattern(line: str, exact: bool = False, free_cells: tuple[int, ...] = ()) -> re.Pattern:
    """The regular expression a printed line must match to be the shown ``line``: its words
    as they are, any run of spaces or of a table's rule characters for one, any text for a
    ``…`` (a group, so an update can put the ``…`` back), any decimal for a decimal unless
    ``exact``, and any integer in the table cells numbered ``free_cells``."""
    out, cell = [r"\s*"], 0
    for m in TOKEN.finditer(line.strip()):
        kind, text = m.lastgroup, m.group()
        if text in (BODY, HEADER):
            cell += 1
        if kind == "integer" and cell in free_cells:
            out.append(r"\d+")
        elif kind == "any":
            out.append("(.*?)")
        elif kind == "number" and not exact:
            out.append(NUMBER)
        elif kind == "space":
            out.append(r"\s+")
        elif kind == "rule":
            out.append(re.escape(text[0]) + "+")
        else:
            out.append(re.escape(text))
    return re.compile("".join(out) + r"\s*")


def rank_cells(lines: list[str]) -> tuple[int, ...]:
    """The cells (numbered from 1 after each ``┃``) of a table headed ``rank``: the row's place,
    free when rows are matched as a set."""
    for line in lines:
        if line.lstrip().startswith(HEADER):
            cells = [c.strip() for c in line.strip().split(HEADER)[1:-1]]
            return tuple(k + 1 for k, c in enumerate(cells) if c == "rank")
    return ()


def is_row(line: str) -> bool:
    return line.lstrip().startswith(BODY)


def segments(lines: list[str]) -> list[list[str]]:
    """Lines in order, each alone, except the rows of a table's body, together."""
    out: list[list[str]] = []
    for line in lines:
        if is_row(line) and out and is_row(out[-1][0]):
            out[-1].append(line)
        else:
            out.append([line])
    return out


def trimmed(text: str) -> list[str]:
    """The lines of ``text`` without trailing spaces, nor blank lines at either end."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def compare(shown: str, printed: str, exact: bool = False) -> tuple[list[str], str]:
    """Differences between an output block and what was printed (none: it matches), and the
    block as an update writes it: what was printed, with each ``…`` of a matching line kept."""
    want, got = trimmed(shown), trimmed(printed)
    a, b = segments(want), segments(got)
    if [(is_row(s[0]), len(s)) for s in a] != [(is_row(s[0]), len(s)) for s in b]:
        return ["the lines differ:\n" + side_by_side(want, got)], "\n".join(got)
    free = rank_cells(want)
    problems, updated = [], []
    for shown_lines, printed_lines in zip(a, b, strict=True):
        table = is_row(shown_lines[0])  # its rows match in any order
        unused = [pattern(line, exact, free if table else ()) for line in shown_lines]
        for line in printed_lines:
            k = next((k for k, p in enumerate(unused) if p.fullmatch(line)), None)
            if k is None:
                problems.append(f"printed: {line.strip()!r}\n  shown: "
                                + ("no row matches it" if table else repr(shown_lines[0].strip())))
                updated.append(line)
            else:
                updated.append(keep_wildcards(unused.pop(k).fullmatch(line), line))
    return problems, "\n".join(updated)


def keep_wildcards(m: re.Match, line: str) -> str:
    """``line`` with the text each ``…`` of its pattern matched put back as ``…``."""
    for k in range(len(m.groups()), 0, -1):
        line = line[:m.start(k)] + "…" + line[m.end(k):]
    return line


def side_by_side(want: list[str], got: list[str]) -> str:
    return "shown:\n" + "\n".join(f"  {w}" for w in want) + "\nprinted:\n" + "\n".join(f"  {g}" for g in got)


# ----- running ---------------------------------------------------------------------------------------
DRIVER = r"""
import contextlib, io, json, os, sys, traceback
sys.path.insert(0, "")  # modules saved in the working folder import, as in `python` started there
replies = os.fdopen(int(sys.argv[1]), "w")
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    code, out, error = json.loads(request), io.StringIO(), None
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, "<tutorial block>", "exec"), namespace)
        except BaseException:
            error = traceback.format_exc()
    replies.write(json.dumps({"out": out.getvalue(), "error": error}) + "\n")
    replies.flush()
"""


class TutorialFailed(AssertionError):
    """A block failed, or printed what its page does not show."""


class Python:
    """One interpreter in the working folder running a page's Python blocks in one namespace."""

    def __init__(self, cwd: Path, env: dict, log: Path):
        read, write = os.pipe()
        self.log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(write)], cwd=cwd, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                     pass_fds=(write,))
        os.close(write)
        self.replies = os.fdopen(read)

    def run(self, code: str) -> tuple[str, str | None]:
        """What ``code`` printed, and its traceback if it raised."""
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        if not select.select([self.replies], [], [], TIMEOUT_S)[0]:
            raise TutorialFailed(f"a Python block ran for {TIMEOUT_S} s: hung?\n{self.output()}")
        reply = self.replies.readline()
        if not reply:
            raise TutorialFailed(f"the Python interpreter died (exit {self.proc.wait()}):\n{self.output()}")
        done = json.loads(reply)
        return done["out"], done["error"]

    def output(self) -> str:
        """The end of what the interpreter wrote outside the blocks' captured prints."""
        self.log.flush()
        return Path(self.log.name).read_text()[-3000:]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.replies.close()
        self.log.close()


def command_line(words: list[str]) -> list[str] | str:
    """The process a shell command of a page starts, or why it is not run here."""
    from conftest import _have_mpi, mpi_command, mpi_python

    if words[0] == "shoal":
        return [sys.executable, "-m", "shoal", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[0] in ("mpiexec", "mpirun") and "-n" in words:
        if not _have_mpi():
            return "needs mpi4py and mpiexec (pip install shoal[mpi])"
        ranks, rest = int(words[words.index("-n") + 1]), words[words.index("-n") + 2:]
        return mpi_command(ranks, *rest[1:]) if rest[0] == "shoal" else mpi_python(ranks, *rest[1:])
    raise TutorialFailed(f"the tutorials' runner starts shoal, python and mpiexec only, not {words[0]!r}")


@dataclass
class Outcome:
    """What running a page gave: the differences found, the page as an update would write it,
    and the blocks not run with why."""

    problems: list[str]
    updated: str
    skipped: list[str]


def run_page(page: Path, workdir: Path) -> Outcome:
    """Run ``page``'s blocks in ``workdir`` and compare each output block with what was printed.

    Raises
    ------
    TutorialFailed
        At the first block that fails (a command's exit code, a Python exception, a claim's
        ``assert``), with what it printed.
    """
    from conftest import MPI_ENV

    text = page.read_text()
    env = {**os.environ, **MPI_ENV, "COLUMNS": COLUMNS}
    env.pop("FORCE_COLOR", None)
    workdir.mkdir(parents=True, exist_ok=True)
    home = str(workdir.resolve())
    python: Python | None = None
    printed: dict[int, str] = {}  # id(block) -> its standard output
    problems, skipped, edits = [], [], []
    try:
        for b in blocks(text):
            where = f"{page.name}: {b.name}"
            if "not run" in b.markers:
                skipped.append(f"{where}: {b.markers['not run']}")
                continue
            if "file" in b.markers:
                (workdir / b.markers["file"]).write_text(b.code)
                continue
            if is_output(b):
                if id(b.follows) not in printed:
                    continue  # after a skipped command
                found, updated = compare(b.code, printed[id(b.follows)], exact=b.markers.get("output") == "exact")
                problems += [f"{page.name}: {b.follows.name}:\n{p}" for p in found]
                edits.append((b, updated))
                continue
            if b.lang == "bash":
                out = []
                for words in shell_commands(b.code):
                    argv = command_line(words)
                    if isinstance(argv, str):
                        skipped.append(f"{where}: {argv}")
                        continue
                    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                                          timeout=TIMEOUT_S)
                    if done.returncode != 0:
                        raise TutorialFailed(f"{where}: `{' '.join(words)}` exited {done.returncode}:\n"
                                             f"{done.stdout}\n{done.stderr}")
                    out.append(done.stdout)
                printed[id(b)] = "".join(out).replace(home, "…")
            elif b.lang == "python":
                python = python or Python(workdir, env, workdir / "python.log")
                out, error = python.run(b.code)
                if error:
                    raise TutorialFailed(f"{where} raised:\n{error}\nafter printing:\n{out}\n{python.output()}")
                printed[id(b)] = out.replace(home, "…")
    finally:
        if python is not None:
            python.close()
    return Outcome(problems, rewrite(text, edits), skipped)


def rewrite(text: str, edits: list[tuple[Block, str]]) -> str:
    """``text`` with each output block's text replaced."""
    for b, new in sorted(edits, key=lambda e: e[0].start, reverse=True):
        text = text[:b.start] + new + "\n" + text[b.end:]
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--update", action="store_true", help="rewrite the output blocks with what was printed")
    ap.add_argument("--keep", type=Path, help="run in this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    failed = 0
    for page in args.pages:
        with tempfile.TemporaryDirectory(prefix="tutorial-") as tmp:
            workdir = args.keep / page.stem if args.keep else Path(tmp)
            try:
                outcome = run_page(page, workdir)
            except TutorialFailed as exc:
                print(f"{page}: FAILED, left as it was\n{exc}")
                failed += 1
                continue
        for line in outcome.skipped:
            print(f"not run: {line}")
        if args.update:
            page.write_text(outcome.updated)
            print(f"{page}: output blocks rewritten ({len(outcome.problems)} lines did not match)")
        else:
            print(f"{page}: " + ("as shown" if not outcome.problems else "differs\n" + "\n".join(outcome.problems)))
            failed += bool(outcome.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
