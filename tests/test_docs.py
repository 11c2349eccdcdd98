"""The documentation holds: every public object of the API reference has a docstring that
explains its parameters, the trace page lists every column and group of the schema, and the
code and commands the pages show parse (Python, TOML, JSON, and ``shoal`` command lines
against the real argument parser). ``make docs`` builds the site itself; this stays fast."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from shoal.cli import build_parser
from shoal.records import BALANCE, MESSAGES, TASKS
from shoal.tiling import Tiling
from shoal.trace import GROUP_VERSIONS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


# ----- which objects are public --------------------------------------------------------------------
def reference_modules() -> list[str]:
    """The modules the API reference renders (its ``::: module`` lines): the public modules."""
    names = []
    for page in sorted((DOCS / "reference").glob("*.md")):
        names += re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M)
    return names


def public_objects(module) -> list[tuple[str, object]]:
    """Functions and classes in ``__all__``, or else defined in the module without a leading ``_``."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, o in vars(module).items() if not n.startswith("_")
                 and getattr(o, "__module__", None) == module.__name__]
    return [(f"{module.__name__}.{n}", getattr(module, n)) for n in names
            if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))]


def public_members(cls) -> list[tuple[str, object]]:
    """Methods and properties a class defines itself (inherited ones are checked on their class)."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            out.append((name, member))
    return out


def docstring(obj, owner=None, name=None) -> str | None:
    """The object's own docstring; a method without one takes the one it overrides. The text
    ``dataclass`` makes up (``Name(field: type, ...)``) does not count."""
    target = obj.fget if isinstance(obj, property) else obj
    doc = target.__doc__
    if not doc and owner is not None:
        for base in owner.__mro__[1:]:
            inherited = vars(base).get(name)
            if inherited is not None:
                inherited = inherited.fget if isinstance(inherited, property) else inherited
                doc = getattr(inherited, "__func__", inherited).__doc__
                if doc:
                    break
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
        return None
    return inspect.cleandoc(doc) if doc else None


def named_parameters(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def self_describing(fn, name: str) -> bool:
    """A parameter named after its type (``tiling: Tiling``) needs no words of its own."""
    annotation = str(fn.__annotations__.get(name, "")).split("|")[0].strip().rsplit(".", 1)[-1]
    return annotation.lower() == name.lower()


HAS_PARAMETERS_SECTION = re.compile(r"^Parameters\n-{3,}$", re.M)


def undescribed_parameters(fn, doc: str) -> list[str]:
    """Parameters of a function of two or more that its docstring never names (none when it
    has a NumPy ``Parameters`` section): a reader would have to guess what they are."""
    params = named_parameters(fn)
    if len(params) < 2 or HAS_PARAMETERS_SECTION.search(doc):
        return []
    return [p for p in params if not re.search(rf"\b{re.escape(p)}\b", doc) and not self_describing(fn, p)]


def documentation_gaps() -> set[str]:
    """``name: no docstring`` or ``name: parameters a, b not described`` for every public object."""
    gaps, seen = set(), set()
    for module_name in reference_modules():
        for qualname, obj in public_objects(importlib.import_module(module_name)):
            if id(obj) in seen:  # re-exported by a package and documented where it is defined
                continue
            seen.add(id(obj))
            entries = [(qualname, obj, None, None)]
            if inspect.isclass(obj):
                entries += [(f"{qualname}.{n}", m, obj, n) for n, m in public_members(obj)]
            for name, member, owner, attr in entries:
                doc = docstring(member, owner, attr)
                if doc is None:
                    gaps.add(f"{name}: no docstring")
                elif inspect.isfunction(member) and (missing := undescribed_parameters(member, doc)):
                    gaps.add(f"{name}: parameters {', '.join(missing)} not described")
    return gaps


def test_every_public_module_of_the_reference_imports():
    modules = reference_modules()
    assert {"shoal", "shoal.session", "shoal.runtime.app", "shoal.runtime.simulation", "shoal.trace",
            "shoal.config", "shoal.placement", "shoal.replay", "shoal.files"} <= set(modules)
    for name in modules:
        assert importlib.import_module(name).__doc__, f"module {name} has no docstring"


# The failure lists every public object without a docstring or whose docstring leaves a
# parameter unnamed.
def test_public_functions_and_classes_have_docstrings_that_describe_their_parameters():
    gaps = sorted(documentation_gaps())
    assert not gaps, f"{len(gaps)} gaps in the public API's docstrings:\n" + "\n".join(gaps)


def test_the_parameter_rule_accepts_a_numpy_section_or_names_in_prose_and_nothing_less():
    def numpy_style(a, b):
        """Add.

        Parameters
        ----------
        a, b : float
        """

    def prose(tiling, cluster, seed=0):
        """Owners of ``tiling``'s tiles on ``cluster``, random from ``seed``."""

    def typed(tiling: Tiling, seed: int = 0):
        """Owners at random from ``seed``."""

    def vague(first, second):
        """Do the thing."""

    def single(x):
        """One parameter needs no words about it."""

    assert undescribed_parameters(numpy_style, docstring(numpy_style)) == []
    assert undescribed_parameters(prose, docstring(prose)) == []
    assert undescribed_parameters(typed, docstring(typed)) == []
    assert undescribed_parameters(vague, docstring(vague)) == ["first", "second"]
    assert undescribed_parameters(single, docstring(single)) == []

    @dataclasses.dataclass
    class Bare:
        x: int

    assert docstring(Bare) is None


# ----- the trace page ----------------------------------------------------------------------------
def section(text: str, heading: str) -> str:
    """The text from a line starting with ``heading`` to the next heading of any level."""
    start = text.index(heading)
    end = re.search(r"^#", text[start + len(heading):], re.M)
    return text[start:] if end is None else text[start:start + len(heading) + end.start()]


@pytest.mark.parametrize("heading, schema", [("## `/tasks`", TASKS), ("## `/messages`", MESSAGES),
                                             ("`/balance`", BALANCE)])
def test_the_trace_page_lists_every_column_with_its_unit(heading, schema):
    table = section((DOCS / "trace.md").read_text(), heading)
    for column in schema.columns:
        row = re.search(rf"^\s*\| `{column.name}` \|([^\n]*)$", table, re.M)
        assert row is not None, f"trace.md: {heading} does not list column {column.name!r}"
        cells = [c.strip() for c in row.group(1).split("|")]
        assert cells[1] == column.unit, f"trace.md: {column.name!r} has unit {cells[1]!r}, the schema {column.unit!r}"


def test_the_trace_page_describes_every_optional_group():
    text = (DOCS / "trace.md").read_text()
    for group in GROUP_VERSIONS:
        assert f"`/{group}`" in text, f"trace.md does not describe the optional group /{group}"


# ----- code on the pages -------------------------------------------------------------------------
def code_blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block, README inclusions resolved as the site does."""
    text = hooks().on_page_markdown(page.read_text())
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shell_commands(code: str) -> list[list[str]]:
    """Each command line of a shell block as words (continuation lines joined, comments dropped)."""
    return [words for line in code.replace("\\\n", " ").splitlines() if (words := shlex.split(line, comments=True))]


def shoal_argv(words: list[str]) -> list[str] | None:
    """The arguments given to ``shoal`` in a command line (after ``mpiexec``/``srun``), if any."""
    return words[words.index("shoal") + 1:] if "shoal" in words else None


def test_every_page_has_been_checked():
    assert {p.relative_to(DOCS).as_posix() for p in PAGES} >= {
        "index.md", "run-folder.md", "trace.md", "tutorials/dam-break-paraview.md", "tutorials/replay-sweep.md",
        "tutorials/writing-an-app.md", "tutorials/sampi.md", "tutorials/study.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_code_blocks_parse_and_shoal_commands_exist(page):
    parser, checked = build_parser(), 0
    commands = parser._subparsers._group_actions[0].choices  # the subcommands `shoal --help` lists
    for language, code in code_blocks(page):
        where = f"{page.relative_to(DOCS)}: ```{language} block starting {code.splitlines()[0]!r}"
        if language == "python":
            ast.parse(code, filename=str(page))
        elif language == "toml":
            tomllib.loads(code)
        elif language == "json":
            json.loads(code)
        elif language == "bash":
            for words in shell_commands(code):
                argv = shoal_argv(words)
                if argv is None:
                    continue
                assert argv[0] in commands, f"{where}: `shoal {argv[0]}` is not a shoal command"
                try:
                    parser.parse_args(argv)
                except SystemExit:
                    pytest.fail(f"{where}: `shoal {shlex.join(argv)}` does not parse")
        else:
            continue
        checked += 1
    if page.parent.name == "tutorials":
        assert checked >= 3, f"{page.name}: too few code blocks checked ({checked})"


PENDING: set[str] = set()  # names a page may show before they land in shoal (none now)


def test_the_names_the_pages_import_from_shoal_exist():
    missing = set()
    for page in PAGES:
        for language, code in code_blocks(page):
            if language != "python":
                continue
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shoal"):
                    module = importlib.import_module(node.module)
                    missing |= {f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                                and not (hasattr(module, "__path__")  # a submodule of a package
                                         and importlib.util.find_spec(f"{node.module}.{a.name}"))}
    assert missing <= PENDING, f"the pages import names shoal lacks: {sorted(missing - PENDING)}"
    if missing:
        pytest.xfail(f"not yet in shoal: {sorted(missing)}")


def test_the_extras_the_pages_install_exist():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = set()
    for page in PAGES:
        for _, code in code_blocks(page):
            named |= {e for group in re.findall(r"\.\[([\w,]+)\]", code) for e in group.split(",")}
        named |= set(re.findall(r"^\| `(\w+)` \|", page.read_text(), re.M)) & {"mpi", "openmpi", "analysis",
                                                                                "video", "docs", "dev"}
    assert named >= {"mpi", "openmpi", "analysis"}
    assert named <= set(extras), f"pages name extras pyproject.toml lacks: {sorted(named - set(extras))}"


def test_the_writing_an_app_tutorial_shows_the_readme_app_it_explains():
    page = DOCS / "tutorials" / "writing-an-app.md"
    assert "<!-- readme-code: Add a physics model -->" in page.read_text()
    shown = [code for language, code in code_blocks(page) if language == "python"]
    assert any("class Heat(App)" in code and "register_app(" in code for code in shown)
    with pytest.raises(ValueError, match="no heading"):
        hooks().readme_code("A section that is not there")
