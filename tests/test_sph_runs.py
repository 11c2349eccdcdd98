"""SPH through the command line: run folders, particle comparison, pictures and VTK."""

import numpy as np
import pytest

from shoal.cli import main
from shoal.session import run_scenario

SMALL = ["app.dx=0.05", "app.tank=[2.0, 1.2]", "app.fluid=[[0.0, 0.0, 0.5, 1.0]]", "run.frame_every=10"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("sph")
    made = {}
    for name, kw, extra in [
        ("one", dict(tiles=1, nodes=1), []),
        ("many", dict(tiles=12, nodes=3, placement="birdshot"), []),
        ("lazy", dict(tiles=12, nodes=3), ["app.halo_every=4"]),
    ]:
        made[name] = run_scenario("sph-dam-break", steps=30, out=base / name, set=SMALL + extra, **kw).path
    return made


def test_compare_matches_particles_by_id(runs, capsys):
    assert main(["compare", str(runs["one"]), str(runs["many"])]) == 0
    out = capsys.readouterr().out
    assert "only in A: 0; only in B: 0" in out and "position difference: max 0 m" in out


def test_compare_reports_the_error_of_lazy_updates(runs, capsys):
    assert main(["compare", str(runs["one"]), str(runs["lazy"])]) == 1
    out = capsys.readouterr().out
    assert "position difference: max" in out and "different" in out


def test_report_writes_frames_contours_animation_and_a_paraview_series_vtk_reads(runs):
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLPolyDataReader

    from shoal.report import report_run

    run = runs["many"]
    paths = report_run(run)
    names = {p.name for p in paths}
    assert {"contours-final.png", "load-heatmap.png", "timeline.png"} <= names
    frames = sorted((run / "frames").glob("state-*.npz"))
    assert len(frames) == 4  # initial state and every 10 steps
    movie = next(p for p in paths if p.stem == "animation")  # MP4 when ffmpeg is at hand, else GIF
    assert movie_frames(movie) == len(frames)
    with np.load(frames[-1]) as z:
        assert (run / "frames" / "series.pvd") in paths
        reader = vtkXMLPolyDataReader()
        reader.SetFileName(str(run / "frames" / "paraview" / f"{frames[-1].stem}.vtp"))
        reader.Update()
        mesh = reader.GetOutput()
        points, data = vtk_to_numpy(mesh.GetPoints().GetData()), mesh.GetPointData()
        assert np.array_equal(points[:, :2], z["x"]) and np.all(points[:, 2] == 0)
        assert np.array_equal(vtk_to_numpy(data.GetArray("density")), z["rho"])
        assert np.array_equal(vtk_to_numpy(data.GetArray("velocity"))[:, :2], z["v"])
        assert np.array_equal(vtk_to_numpy(data.GetArray("id")), z["id"])
    assert (run / "surge-front.png").exists()  # a Martin & Moyce column


def movie_frames(path) -> int:
    if path.suffix == ".gif":
        from PIL import Image

        with Image.open(path) as gif:
            return gif.n_frames
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    next(reader)  # the metadata
    return sum(1 for _ in reader)


def test_frames_hold_the_state_the_run_ends_with(runs):
    with np.load(runs["many"] / "state" / "final.npz") as final, \
            np.load(runs["many"] / "frames" / "state-000030.npz") as last:
        for k in final.files:
            assert final[k].tobytes() == last[k].tobytes()


def test_the_time_step_is_a_lagged_reduction_in_the_trace_and_its_replay(runs):
    from shoal.replay import ReplayConfig, replay
    from shoal.trace import Trace

    trace = Trace.read(runs["many"])
    assert trace.barrier_phases == [True, False, False] and trace.lagged_phases == [True, False, False]
    tasks = trace.tasks
    rates, move = tasks["phase"] == 0, tasks["phase"] == 1
    # in the real run some tile moves before the last tile of its step has its rates
    early = [tasks["start"][move & (tasks["step"] == s)].min() < tasks["end"][rates & (tasks["step"] == s)].max()
             for s in range(1, 30)]
    assert any(early)
    predicted = replay(trace, ReplayConfig(nodes=3, cores=1, placement="birdshot")).trace
    assert predicted.lagged_phases == [True, False, False]
