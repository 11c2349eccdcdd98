"""The apps of the MPI stop tests, built the same way by the ranks and by the serial reference."""

from shoal.apps import get_app
from shoal.tiling import Tiling


def stop_app(name: str):
    """The app, tiling and steps of a stop test: 2D SPH (run on the Python executor), or the
    synthetic hot spot (on the native one), given work enough to be stopped well before its end."""
    if name == "sph2d":
        app, tiles, steps = get_app("sph2d").tiny_app(), 6, 200
    else:
        spec = get_app("synthetic")
        app, tiles, steps = spec.build(spec.params(grid=[96, 96], work_per_cell=200.0), 100000), 12, 100000
    tiling = Tiling.from_count(app.grid, tiles)
    app.prepare(tiling)
    return app, tiling, steps
