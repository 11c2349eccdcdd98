"""Scenarios and configuration: one source of truth.

A scenario is a TOML file::

    name = "synthetic-hotspot"
    description = "..."
    [run]            # fills RunParams
    steps = 60
    [app]            # `name` picks the app; the other keys fill the app's parameter dataclass
    name = "synthetic"
    grid = [256, 256]
    [balance]        # optional: parameters of balancing policies, by policy name
    refine.tolerance = 1.02

``--set section.key=value`` (for example ``--set run.steps=10`` or ``--set app.grid=[64,64]``)
overrides any field, and ``--lb policy.key=value`` any policy parameter; an unknown key is an
error that names the valid ones. The resolved configuration is saved in the run folder as
``config.toml``, itself a valid scenario.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from .apps import get_app
from .errors import ShoalError
from .options import assign, at_least, both, check, option


def _period(value: int | str) -> int | str:
    from .placement.trigger import parse_period  # the placement package imports this module's users

    return parse_period(value)


def _check_period(value: int | str) -> None:
    _period(value)


# run.executor: the compiled backend where the app compiles its phases in one process, else the
# reference one; the reference backend; the compiled one
EXECUTORS = ("auto", "python", "native")


def _check_executor(name: str) -> str | None:
    return None if name in EXECUTORS else f"must be one of {', '.join(EXECUTORS)}"


def _check_policy(name: str) -> None:
    from .placement import get_policy

    get_policy(name)


def _recordable(steps: int) -> str | None:
    if steps > MAX_STEPS:
        return f"must be <= {MAX_STEPS} (a trace numbers steps with 32-bit integers)"
    return None


MAX_STEPS = 2**31 - 1
SCENARIOS = "the scenario's"


@dataclass
class RunParams:
    """How a scenario runs: the ``[run]`` table, each field declared once (:mod:`shoal.options`)
    with its type, default, help and check; the fields with a flag are also ``shoal run``'s flags
    and keywords of :func:`shoal.run`. :meth:`validate` checks them."""

    steps: int = option(50, "time steps, counted from step 0", check=both(at_least(1), _recordable), unset=SCENARIOS)
    tiles: int = option(0, "total number of tiles (0: tiles_per_core x the cluster's cores)", check=at_least(0),
                        group="tiles", unset=SCENARIOS)
    tiles_per_core: int = option(4, "tiles per worker thread of the cluster, when tiles is 0", check=at_least(1),
                                 group="tiles", unset=SCENARIOS)
    tile_shape: list[int] = option(help="cells of a tile along each axis; wins over tiles", flag=False,
                                   default_factory=list)
    nodes: int = option(2, "nodes of the cluster (MPI ranks, or nodes inside this process)", check=at_least(1),
                        unset=SCENARIOS)
    workers: int = option(1, "worker threads on each node at the start", check=at_least(1), unset=SCENARIOS)
    placement: str = option("sfc", "the placement policy (static, or dynamic with a period)", check=_check_policy,
                            unset=SCENARIOS)
    initial: str = option("sfc", "the static placement a dynamic policy starts from", check=_check_policy,
                          unset=SCENARIOS)
    period: int | str = option(0, "steps between rebalancing (dynamic policies; 0: never), or 'adaptive': when the "
                                  "measured imbalance has cost more than the last balancing step",
                               parse=_period, check=_check_period, unset=SCENARIOS)
    seed: int = option(0, "seed of random placements and balancers", check=at_least(0), unset=SCENARIOS)
    halo: int = option(1, "halo width in cells", flag=False, check=at_least(0))
    checkpoint_every: int = option(0, "steps between checkpoints (0: none)", check=at_least(0), unset=SCENARIOS)
    frame_every: int = option(0, "steps between the app's frames in frames/, the last step's too (0: none; the final "
                                 "state is always state/final.npz)", flag=False,
                              check=at_least(0))
    executor: str = option("auto", "the executor backend: native (compiled workers; phases an app leaves in Python "
                                   "run through its trampoline), python (the reference), or auto: native where the "
                                   "app compiles its phases for the run in one process, python elsewhere",
                           check=_check_executor, unset=SCENARIOS)
    overlap: bool = option(True, "MPI: send halos the moment they are packed (false: once the rank ends the phase)",
                           flag=False)
    resize: list[list[int]] = option(help="[step, node, workers] entries: from step on, node runs workers threads",
                                     flag=False, default_factory=list)

    def validate(self) -> None:
        """Check every field (its declared check, the resize schedule inside the run) and
        normalise the period.

        Raises
        ------
        ShoalError
            Naming the first field that is wrong (``run.<field>``) and its value.
        """
        check(self, "run.")
        self.period = _period(self.period)
        for entry in self.resize:
            if len(entry) != 3 or not all(isinstance(v, int) for v in entry):
                raise ShoalError(f"every run.resize entry is [step, node, workers], got {entry}")
            step, node, workers = entry
            if not 0 < step < self.steps or not 0 <= node < self.nodes or workers < 1:
                raise ShoalError(f"run.resize entry {entry}: the step must lie in 1..{self.steps - 1}, the node in "
                                 f"0..{self.nodes - 1}, and a node keeps at least one worker")

    def workers_from(self, step: int) -> list[tuple[int, dict[int, int]]]:
        """The resize schedule after ``step``: ``[(step, {node: workers})]`` in step order."""
        at: dict[int, dict[int, int]] = {}
        for s, node, workers in self.resize:
            if s > step:
                at.setdefault(s, {})[node] = workers
        return sorted(at.items())

    def workers_at(self, step: int) -> list[int]:
        """Worker threads of every node at ``step`` (a resumed run starts with them)."""
        cores = [self.workers] * self.nodes
        for s, node, workers in sorted(self.resize):
            if s <= step:
                cores[node] = workers
        return cores


@dataclass
class Scenario:
    """A named, fully resolved configuration: run parameters plus the app's parameters.

    Attributes
    ----------
    name : str
        The scenario's name (a built-in's, or the file's stem).
    description : str
        One line for listings.
    app : str
        The app's registry name.
    run : RunParams
        The ``[run]`` table.
    params : dataclass
        The app's parameters (its ``AppSpec.params``), from the ``[app]`` table.
    balance : dict
        ``{policy name: {parameter: value}}`` from the ``[balance]`` table and ``--lb``.
    """

    name: str
    description: str
    app: str
    run: RunParams
    params: Any
    balance: dict[str, dict[str, Any]] = field(default_factory=dict)  # policy -> its parameters

    def to_dict(self) -> dict:
        """The scenario as plain TOML-ready values: ``name``, ``description``, the ``run`` and
        ``app`` tables (``app.name`` included) and ``balance`` when it is not empty;
        ``scenario_from_dict`` reads it back."""
        out = {
            "name": self.name,
            "description": self.description,
            "run": dataclasses.asdict(self.run),
            "app": {"name": self.app, **dataclasses.asdict(self.params)},
        }
        if self.balance:
            out["balance"] = {k: dict(v) for k, v in self.balance.items()}
        return out

    def to_toml(self) -> str:
        """The scenario as TOML text, itself a valid scenario file (the run folder's ``config.toml``)."""
        return tomli_w.dumps(self.to_dict())

    def override(self, assignments: list[str] | tuple[str, ...]) -> Scenario:
        """Apply ``section.key=value`` assignments (values in TOML syntax; bare words are strings),
        then validate the ``[run]`` table and the app's parameters."""
        for text in assignments:
            if "=" not in text:
                raise ShoalError(f"--set expects key=value, got {text!r}")
            key, raw = (s.strip() for s in text.split("=", 1))
            target, name = self._resolve(key)
            assign(target, name, parse_value(raw), key)
        self.run.validate()
        self.params.validate()
        return self

    def override_run(self, values: dict[str, Any]) -> Scenario:
        """Set fields of the ``[run]`` table to typed ``values`` (from flags or keywords: no text
        round trip), each checked against its field's type; :meth:`override` validates them."""
        for name, value in values.items():
            if name not in {f.name for f in dataclasses.fields(RunParams)}:
                raise ShoalError(f"unknown run option {name!r}")
            assign(self.run, name, value, f"run.{name}")
        return self

    def override_balance(self, assignments: list[str] | tuple[str, ...]) -> Scenario:
        """Apply ``policy.key=value`` assignments to the balancing policies' parameters."""
        self.balance = balance_table(self.balance, assignments)
        return self

    def _resolve(self, key: str):
        run_keys = [f.name for f in dataclasses.fields(self.run)]
        app_keys = [f.name for f in dataclasses.fields(self.params)]
        valid = [f"run.{k}" for k in run_keys] + [f"app.{k}" for k in app_keys]
        section, _, name = key.rpartition(".")
        if not section:  # a bare key is fine when it names exactly one field
            hits = [k for k in valid if k.split(".", 1)[1] == name]
            if len(hits) == 1:
                section, name = hits[0].split(".", 1)
        if section == "run" and name in run_keys:
            return self.run, name
        if section == "app" and name in app_keys:
            return self.params, name
        if key == "app.name":
            raise ShoalError("app.name cannot be overridden: pick another scenario")
        raise ShoalError(f"unknown key {key!r}; valid keys: {', '.join(valid)}")


def parse_toml(text: str, source: str) -> dict:
    """TOML ``text`` from ``source`` as a table; a ShoalError naming ``source`` for invalid TOML,
    and for TOML nested so deeply that the parser would run out of stack (a thousand tables)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShoalError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ShoalError(f"{source}: invalid TOML: nested too deeply") from None


def parse_value(raw: str) -> Any:
    """A ``--set`` value's TOML text ``raw`` read as ``--set`` reads it: a bare word is a string;
    TOML nested too deeply is a ShoalError."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw  # a bare word such as birdshot
    except RecursionError:
        raise ShoalError(f"--set {raw[:20]}...: invalid TOML: nested too deeply") from None


def _from_table(cls, table: dict, section: str):
    if not isinstance(table, dict):
        raise ShoalError(f"[{section}] must be a table of keys and values, got {section} = {table!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    obj = cls()
    for k, v in table.items():
        if k not in names:
            valid = ", ".join(f"{section}.{n}" for n in sorted(names))
            raise ShoalError(f"unknown key {section}.{k}; valid keys: {valid}")
        assign(obj, k, v, f"{section}.{k}")
    return obj


def balance_table(table: dict, assignments: list[str] | tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Policy parameters from a scenario's ``[balance]`` table, then ``policy.key=value``
    assignments (TOML values; the command line wins), each checked against the policy's typed
    parameters. Returns plain values by policy name."""
    from .placement import get_policy

    out: dict[str, dict[str, Any]] = {}
    items = []
    if not isinstance(table, dict):
        raise ShoalError(f"[balance] must be a table of policy parameters, got {table!r}")
    for name, params in table.items():
        if not isinstance(params, dict):
            raise ShoalError(f"balance.{name} must be a table (for example balance.{name}.tolerance = 1.05)")
        items += [(name, k, v, f"balance.{name}.{k}") for k, v in params.items()]
    for text in assignments:
        key, sep, raw = text.partition("=")
        name, dot, param = key.strip().rpartition(".")
        if not sep or not dot:
            raise ShoalError(f"--lb expects policy.key=value (for example refine.tolerance=1.02), got {text!r}")
        items.append((name, param, parse_value(raw.strip()), f"--lb {key.strip()}"))
    for name, param, value, where in items:
        kind = get_policy(name).params
        names = [f.name for f in dataclasses.fields(kind)]
        if param not in names:
            valid = ", ".join(f"{name}.{n}" for n in names) or "none"
            raise ShoalError(f"{where}: unknown parameter of {name!r}; its parameters: {valid}")
        values = out.setdefault(name, {})
        holder = kind(**values)
        assign(holder, param, value, where)
        holder.validate()
        values[param] = getattr(holder, param)
    return out


def scenario_from_dict(d: dict, source: str = "scenario") -> Scenario:
    """A validated scenario from a parsed TOML table.

    Parameters
    ----------
    d : dict
        Top-level keys ``name``, ``description``, ``run``, ``app`` (which must hold the app's
        ``name``) and ``balance``; nothing else.
    source : str
        Where ``d`` came from (a file name or a scenario's name), to start every error message;
        also the scenario's name, by its stem, when ``d`` has none.

    Returns
    -------
    Scenario
        With every table checked against its dataclass's field types and validated.

    Raises
    ------
    ShoalError
        Naming ``source`` and the key at fault: an unknown key, a table that is not a table, a
        value of the wrong type or out of range, an unknown app or policy.
    """
    unknown = set(d) - {"name", "description", "run", "app", "balance"}
    if unknown:
        raise ShoalError(f"{source}: unknown top-level keys {sorted(unknown)}; valid: name, description, run, app, "
                         "balance")
    if not isinstance(d.get("app", {}), dict):
        raise ShoalError(f"{source}: [app] must be a table of keys and values, got app = {d['app']!r}")
    app_table = dict(d.get("app", {}))
    if "name" not in app_table:
        raise ShoalError(f"{source}: [app] needs a name")
    spec = get_app(app_table.pop("name"))
    sc = Scenario(
        name=str(d.get("name", Path(source).stem)),
        description=str(d.get("description", "")),
        app=spec.name,
        run=_from_table(RunParams, d.get("run", {}), "run"),
        params=_from_table(spec.params, app_table, "app"),
        balance=balance_table(d.get("balance", {})),
    )
    sc.run.validate()
    sc.params.validate()
    return sc


def toml_value(value) -> str:
    """``value`` as one line of TOML text (what ``--set key=TEXT`` reads back to the same
    value); ``""`` for ``None``, which TOML cannot spell."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return tomli_w.dumps({"v": value}).strip()[4:]


def scenario_params(scenario) -> dict[str, str]:
    """Every key ``--set`` accepts for ``scenario`` with its current value as TOML text."""
    out = {f"run.{k}": toml_value(v) for k, v in dataclasses.asdict(scenario.run).items()}
    out.update({f"app.{k}": toml_value(v) for k, v in dataclasses.asdict(scenario.params).items()})
    return out


def _builtin_files() -> dict[str, Any]:
    folder = resources.files("shoal") / "scenarios"
    return {p.name[:-5]: p for p in folder.iterdir() if p.name.endswith(".toml")}


def builtin_scenarios() -> dict[str, str]:
    """Names of the built-in scenarios with their one-line descriptions."""
    out = {}
    for name, path in sorted(_builtin_files().items()):
        out[name] = tomllib.loads(path.read_text()).get("description", "")
    return out


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a TOML file by path."""
    files = _builtin_files()
    if name_or_path in files:
        text, source = files[name_or_path].read_text(), name_or_path
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise ShoalError(f"unknown scenario {name_or_path!r}; built-in: {', '.join(sorted(files))}")
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ShoalError(f"{source}: not a TOML scenario (the file is not UTF-8 text)") from None
        except OSError as exc:
            raise ShoalError(f"{source}: cannot read it ({exc.strerror})") from None
    return scenario_from_dict(parse_toml(text, source), source)
