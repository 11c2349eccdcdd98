"""shoal: tiled physical simulations, load balancing, and replay on modeled clusters.

>>> import shoal
>>> run = shoal.run("synthetic-hotspot", placement="birdshot", steps=20)   # doctest: +SKIP
>>> run.report()                                                            # doctest: +SKIP
"""

__version__ = "0.1.0"

from .errors import ShoalError  # noqa: E402


def run(scenario: str, **options):
    """Run a scenario and return its :class:`~shoal.session.RunRecord` (see ``shoal run``)."""
    from .session import run_scenario

    return run_scenario(scenario, **options)


__all__ = ["ShoalError", "run", "__version__"]
