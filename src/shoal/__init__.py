"""shoal: tiled physical simulations, load balancing, and replay on modeled clusters.

>>> import shoal
>>> run = shoal.run("synthetic-hotspot", placement="birdshot", steps=20)   # doctest: +SKIP
>>> run.report()                                                            # doctest: +SKIP

Or own the loop:

>>> sim = shoal.simulation("sph-dam-break", tiles=16, set=["app.dx=0.04"])  # doctest: +SKIP
>>> while sim.step_count < 500:                                             # doctest: +SKIP
...     sim.step()
"""

__version__ = "0.1.0"

from .errors import ShoalError  # noqa: E402


def run(scenario: str, **options):
    """Run a scenario and return its :class:`~shoal.session.RunRecord` (see ``shoal run``)."""
    from .session import run_scenario

    return run_scenario(scenario, **options)


def simulation(scenario: str, **options):
    """A :class:`~shoal.runtime.simulation.Simulation` of a scenario, ready to step (the same
    options as :func:`run`). Its run folder holds the configuration, and the frames and
    checkpoints the scenario asks for as the steps go; call ``close()`` when done."""
    from .runtime.team import current_team
    from .session import RUN_FLAGS, build, resolve

    team = options.pop("team", None) or current_team()
    flags = {k: options.pop(k, None) for k in RUN_FLAGS}
    plan = resolve(scenario, flags, options.pop("set", ()), options.pop("lb", ()), None, options.pop("out", None),
                   team)
    if options:
        raise ShoalError(f"unknown option(s) {', '.join(sorted(options))}")
    return build(plan, team).sim


__all__ = ["ShoalError", "run", "simulation", "__version__"]
