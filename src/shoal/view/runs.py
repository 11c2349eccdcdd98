"""Runs started from the page: one at a time, with parameters checked exactly as ``shoal run --set``
checks them, in a process of their own that feeds the viewer.

A run is ``python -m shoal run SCENARIO --set KEY=VALUE ... --out ROOT/NAME --view-socket PATH``:
the very command a user would type, so its ``config.toml`` holds the scenario with exactly
those assignments, and it is stopped the way a user stops one (``stop`` on the feed, or
SIGINT before it connected): it writes a checkpoint and its folder stays resumable. Its output
goes to ``ROOT/NAME.log``, beside the folder (the folder itself must be empty for the run to
claim it).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import time
import tomllib
from pathlib import Path

import tomli_w

from ..config import builtin_scenarios, load_scenario, parse_value, scenario_params, toml_value
from ..errors import ShoalError
from ..live.protocol import encode
from ..rundir import as_label
from .hub import Hub

#: What a parameter's key may look like (``section.name``).
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
#: How deep a parameter's value may nest lists (a grid nests one level, a resize schedule two).
MAX_DEPTH = 8
#: The app parameters that name a file the run reads (``app.<name>``): a run started from the
#: page reads files under the viewer's root only.
FILE_PARAMS = ("bathymetry_file", "input")
#: Seconds a stopping run has to write its checkpoint before it is terminated.
STOP_GRACE_S = 10.0


def scenarios() -> list[dict]:
    """Every built-in scenario: ``name``, ``description``, ``app`` and ``params`` (see
    :func:`scenario_params`)."""
    out = []
    for name, description in builtin_scenarios().items():
        sc = load_scenario(name)
        out.append({"name": name, "description": description, "app": sc.app, "params": scenario_params(sc)})
    return out


def assignments(scenario: str, params: dict, root: Path | None = None) -> list[str]:
    """The ``--set`` assignments of the changed ``params`` of a built-in scenario, checked as
    ``shoal run`` checks them (the scenario, the overrides, the policy, the machine's limits).

    Parameters
    ----------
    scenario : str
        A built-in scenario's name (files are not accepted from a page).
    params : dict of str to str
        Keys as ``--set`` names them, values as TOML text; keys whose text equals the
        scenario's own are left out.
    root : Path, optional
        The viewer's root, for a run about to start: a file a parameter names
        (:data:`FILE_PARAMS`) must lie in it (a relative path is taken from it), and is
        given to the run as its absolute path.

    Raises
    ------
    ShoalError
        The line ``shoal run`` would print for the same command; or a value nested more than
        :data:`MAX_DEPTH` deep; or a file outside ``root``.
    """
    from ..runtime.team import Team
    from ..session import SimulationOptions, resolve

    if not isinstance(scenario, str) or scenario not in builtin_scenarios():
        raise ShoalError(f"unknown scenario {scenario!r}; built-in: {', '.join(builtin_scenarios())}")
    if not isinstance(params, dict):
        raise ShoalError("params must be a table of keys and TOML values")
    current = scenario_params(load_scenario(scenario))
    out = []
    for key, text in params.items():
        if not isinstance(text, str) or any(c in text for c in "\r\n\0"):
            raise ShoalError(f"{key}: a value is one line of TOML text, got {text!r}")
        if not KEY.fullmatch(str(key)):
            raise ShoalError(f"unknown key {key!r}; valid keys: {', '.join(current)}")
        text = text.strip()
        _check_depth(key, text)
        if current.get(key) == text:
            continue
        section, _, name = key.rpartition(".")
        if root is not None and section in ("", "app") and name in FILE_PARAMS:
            text = _confine(key, text, Path(root))
        out.append(f"{key}={text}")
    resolve(scenario, {}, SimulationOptions(set=tuple(out)), Team())
    return out


def _depth(value) -> int:
    """How deep ``value`` nests lists and tables (0 for a number or a string)."""
    if isinstance(value, dict):
        value = list(value.values())
    return 1 + max(map(_depth, value), default=0) if isinstance(value, list) else 0


def _check_depth(key: str, text: str) -> None:
    """Refuse a value nested more than :data:`MAX_DEPTH` deep (before ``shoal run``'s own
    reading, which would exhaust the stack on thousands of brackets)."""
    try:
        depth = _depth(parse_value(text))
    except (RecursionError, ShoalError):  # nested too deeply for the parser itself
        depth = MAX_DEPTH + 1
    if depth > MAX_DEPTH:
        raise ShoalError(f"{key}: a value nested more than {MAX_DEPTH} deep")


def _confine(key: str, text: str, root: Path) -> str:
    """The TOML text of the file that parameter ``key`` names (``text``) as its absolute path,
    which must lie under ``root`` (symbolic links resolved); an empty or non-string value is
    left to ``shoal run``'s own check."""
    value = parse_value(text)
    if not isinstance(value, str) or not value:
        return text
    root = root.resolve()
    path = (root / value).resolve()  # an absolute value stays itself
    if not path.is_relative_to(root):
        raise ShoalError(f"{key}: {value} lies outside the viewer's root {root} (runs started from the page read "
                         "files there only)")
    return toml_value(str(path))


def params_toml(body: dict) -> str:
    """A parameter set as TOML text: ``scenario = NAME`` and the parameters as tables
    (``[run]``, ``[app]``), each checked as :func:`assignments` checks it.

    Raises
    ------
    ShoalError
        For a body without ``scenario`` and ``params``, or a bad scenario or parameter.
    """
    if not isinstance(body, dict) or not isinstance(body.get("params", {}), dict):
        raise ShoalError("a parameter set is a JSON object with scenario and params")
    scenario, params = body.get("scenario"), body.get("params", {})
    assignments(scenario, params)
    out: dict = {"scenario": scenario}
    for key, text in params.items():
        section, _, name = key.rpartition(".")
        out.setdefault(section or "run", {})[name] = parse_value(text.strip())
    return tomli_w.dumps(out)


def params_from_toml(text: str) -> dict:
    """A parameter set :func:`params_toml` wrote, read back as ``{"scenario", "params"}``
    (values as TOML text) and checked.

    Raises
    ------
    ShoalError
        For text that is not TOML, has no ``scenario``, holds something but tables of values,
        or a bad parameter.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShoalError(f"the parameter set is not valid TOML: {exc}") from None
    except RecursionError:
        raise ShoalError(f"the parameter set nests values more than {MAX_DEPTH} deep") from None
    scenario = data.pop("scenario", None)
    if not isinstance(scenario, str):
        raise ShoalError("the parameter set names no scenario (scenario = \"NAME\")")
    params = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ShoalError(f"{section} = {table!r}: parameters are given in tables ([run], [app])")
        for k, v in table.items():
            if _depth(v) > MAX_DEPTH:
                raise ShoalError(f"{section}.{k}: a value nested more than {MAX_DEPTH} deep")
            params[f"{section}.{k}"] = toml_value(v)
    assignments(scenario, params)
    return {"scenario": scenario, "params": params}


def command(scenario: str, sets: list[str], folder: Path, feed: Path) -> list[str]:
    """The ``shoal run`` command of a run of ``scenario`` started from the page, with the
    ``--set`` assignments ``sets``, into ``folder``, feeding the viewer's socket ``feed``."""
    args = [sys.executable, "-m", "shoal", "run", scenario]
    for a in sets:
        args += ["--set", a]
    return args + ["--out", str(folder), "--view-socket", str(feed)]


def new_name(root: Path, scenario: str) -> str:
    """A run folder's name under ``root`` not taken yet: the scenario and the time (the
    scenario's name is a label, :func:`shoal.rundir.as_label`: the folder is always directly
    under ``root``)."""
    base = f"{as_label(scenario)}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, k = base, 1
    while (root / name).exists() or (root / f"{name}.log").exists():
        name, k = f"{base}-{k}", k + 1
    return name


class Launcher:
    """The run this viewer started, if any: starting, stopping and watching it.

    Parameters
    ----------
    root : Path
        Where run folders are made.
    feed : Path
        The viewer's feed socket, given to each run.
    hub : Hub
        Told when a run fails before it could say so itself.
    """

    def __init__(self, root: Path, feed: Path, hub: Hub):
        self.root, self.feed, self.hub = Path(root), Path(feed), hub
        self.process: asyncio.subprocess.Process | None = None
        self.folder: Path | None = None
        self.log: Path | None = None
        self._watch: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        """Whether the run this viewer started is still going."""
        return self.process is not None and self.process.returncode is None

    async def start(self, scenario: str, params: dict, force: bool = False) -> dict:
        """Start a run of ``scenario`` with the changed ``params`` (see :func:`assignments`).

        Returns
        -------
        dict
            ``name`` and ``folder`` of the run.

        Raises
        ------
        ShoalError
            For a bad scenario or parameter (as ``shoal run`` says it).
        RuntimeError
            When a run is going and ``force`` is false.
        """
        sets = assignments(scenario, params, root=self.root)
        if (self.running or self.hub.running) and not force:
            raise RuntimeError("a run is going: stop it first, or start with force")
        if self.running:
            await self.stop()
            await self._wait_or_kill()
        self.root.mkdir(parents=True, exist_ok=True)
        name = new_name(self.root, scenario)
        self.folder, self.log = self.root / name, self.root / f"{name}.log"
        self.hub.fail(None)
        with open(self.log, "wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                *command(scenario, sets, self.folder, self.feed), stdin=asyncio.subprocess.DEVNULL, stdout=log,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True)  # Ctrl-C reaches the viewer only
        self._watch = asyncio.create_task(self._watch_run(self.process))
        return {"name": name, "folder": str(self.folder)}

    async def _watch_run(self, process: asyncio.subprocess.Process) -> None:
        """When the run ends without having said so (it failed before connecting, or died),
        show its last line of output as the status error."""
        code = await process.wait()
        run = self.hub.run or {}
        said_end = run.get("pid") == process.pid and self.hub.end is not None
        if code != 0 and code != 130 and not said_end:
            line = self.last_line() or f"the run exited with status {code}"
            if run.get("pid") == process.pid:
                self.hub.publish(encode("end", {"status": "failed", "message": line, "step": None, "sent": None,
                                                "dropped": None, "summary": None}))
            self.hub.fail(line)

    def last_line(self) -> str | None:
        """The last non-empty line the run wrote."""
        try:
            lines = self.log.read_text(errors="replace").splitlines() if self.log else []
        except OSError:
            return None
        lines = [ln.strip() for ln in lines if ln.strip()]
        return lines[-1] if lines else None

    async def stop(self) -> bool:
        """Interrupt the run this viewer started as Ctrl-C would (it writes a checkpoint);
        False when none is going."""
        if not self.running:
            return False
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)
        return True

    async def _wait_or_kill(self, grace: float = STOP_GRACE_S) -> None:
        try:
            await asyncio.wait_for(self.process.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 2.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()

    async def shutdown(self, grace: float = STOP_GRACE_S) -> None:
        """Wait up to ``grace`` seconds for a run asked to stop, then terminate it: no process
        is left behind."""
        if self.process is not None:
            if self.running:
                await self._wait_or_kill(grace)
            if self._watch is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._watch
