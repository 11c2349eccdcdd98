"""The cloth as a run: a drape that starts within the contact layers rolls back, keeps its pairs
apart and logs every window; two MPI ranks give the bits of one process; the report draws the
cloth and its windows; bad input is one line."""

import re

import numpy as np
import pytest

from shoal.compare import compare_runs
from shoal.report import report_run
from shoal.session import open_run, run_scenario
from shoal.trace import Trace
from test_bad_inputs import one_error_line

# A 13 x 13 drape 3 mm above the sphere: within the first layer (5 mm) from the start.
SMALL = ["app.n=13", "app.height=0.253", "run.frame_every=4"]
STEPS = 8


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run_scenario("cloth-drape", steps=STEPS, nodes=1, workers=2, tiles=6, set=SMALL,
                        out=tmp_path_factory.mktemp("cloth") / "local")


def test_a_drape_within_the_layers_rolls_back_keeps_its_gap_and_logs_every_window(reference):
    state = reference.state()
    log = state["windows"]
    assert log.shape == (STEPS, 7)
    time, rollbacks, pairs, layers, gap, candidates, crossings = log.T
    assert np.allclose(time, 0.005 * np.arange(1, STEPS + 1))
    assert rollbacks[0] >= 1 and pairs[0] > 0  # the sphere's pairs woke layers, and the window ran again
    assert layers[0] >= 6 * pairs[0]  # 3 mm needs layer 6 or deeper: η l^-1/4 < 3 mm
    assert np.all(gap > 0) and np.all(crossings == 0)
    assert state["clock"][0] == time[-1]
    text = (reference.path / "run.log").read_text()
    assert text.count("rollbacks") == STEPS and "window 0 ends at 0.0050 s" in text
    # The trace holds the same log: the loop's iterations and what agree and keep reduced.
    trace = Trace.read(reference.path / "trace.h5")
    r, phases = trace.reductions, trace.phases
    for name, operand, column in (("agree", 1, gap), ("agree", 2, candidates), ("agree", 3, crossings),
                                  ("keep", 0, pairs), ("keep", 1, layers)):
        rows = (r["phase"] == phases.index(name)) & (r["operand"] == operand)
        np.testing.assert_array_equal(r["value"][rows][np.argsort(r["step"][rows])], column, err_msg=name)
    iterations = trace.iterations()
    np.testing.assert_array_equal([iterations[(s, "material0")] - 1 for s in range(STEPS)], rollbacks)


@pytest.mark.mpi(ranks=(2,))
def test_mpi_ranks_give_the_bits_of_one_process(ranks, reference, mpirun, tmp_path):
    args = ["run", "cloth-drape", "--steps", str(STEPS), "--tiles", "6", "--nodes", str(ranks), "--workers", "1",
            "--out", tmp_path / "mpi"]
    for s in SMALL:
        args += ["--set", s]
    mpirun(ranks, *args)
    cmp = compare_runs(reference.path, tmp_path / "mpi")
    assert cmp.identical, cmp.max_abs_diff
    assert open_run(tmp_path / "mpi").summary["ranks"] == ranks


def test_a_run_resumed_from_its_checkpoint_ends_as_one_that_never_stopped(reference, tmp_path):
    full = run_scenario("cloth-drape", steps=STEPS, nodes=1, workers=2, tiles=6, out=tmp_path / "full",
                        set=[*SMALL, "run.checkpoint_every=3"])
    resumed = run_scenario(None, resume=full.path, out=tmp_path / "resumed", nodes=2)
    assert resumed.summary["resumed_from_step"] == 6
    assert compare_runs(reference.path, full.path).identical and compare_runs(reference.path, resumed.path).identical


def test_the_report_draws_the_cloth_its_windows_and_a_paraview_mesh_series(reference):
    paths = {p.name for p in report_run(reference.path)}
    assert {"cloth.png", "windows.png", "windows.csv", "series.pvd"} <= paths
    rows = (reference.path / "windows.csv").read_text().splitlines()
    assert rows[0] == "time,rollbacks,pairs,layers,min_gap,candidates,intersections" and len(rows) == STEPS + 1
    frames = sorted((reference.path / "frames" / "paraview").glob("*.vtp"))
    assert frames and b"<Polys>" in frames[-1].read_bytes()


@pytest.mark.parametrize("assignment, expected", [
    ("app.eta=0.0", "app.eta must be positive, got 0.0"),
    ("app.density=-0.1", "app.density must be positive"),
    ("app.stiffness=0", "app.stiffness must be positive"),
    ("app.poisson=0.5", "app.poisson must be at least 0 and below 0.5"),
    ("app.scene=\"sail\"", "app.scene must be one of drape, twist, twister"),
    ("app.friction=[0.5]", "app.friction must be two coefficients"),
    ("app.spin=[0.5,-1.0,0.5]", "app.spin's durations must be 0 or more"),
    ("app.friction=[-0.1,0.3]", "friction coefficients must be 0 or more"),
    ("app.dt=0.01", "is longer than its mesh and material allow"),
    ("app.radius=0.4", "the cloth starts inside obstacle 0"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, assignment, expected):
    out = tmp_path / "run"
    line = one_error_line(capsys, ["run", "cloth-drape", "--steps", "2", "--set", "app.n=9", "--set", assignment,
                                   "--out", str(out)])
    assert expected in line
    assert not out.exists()


def test_two_sheets_draped_meet_and_never_intersect(tmp_path):
    """The paper's two cloths draped, in miniature: the upper sheet lands on the lower one as it
    folds over the sphere; at the end no triangle crosses another (an independent check)."""
    ipctk = pytest.importorskip("ipctk")
    rec = run_scenario("cloth-drape", steps=15, nodes=1, workers=2, tiles=4, out=tmp_path / "two",
                       set=["app.n=7", "app.size=0.6", "app.sheets=2", "app.gap=0.02", "app.height=0.26",
                            "run.frame_every=0"])
    state = rec.state()
    time, rollbacks, pairs, layers, gap, _, crossings = state["windows"].T
    assert np.all(gap > 0) and rollbacks.sum() > 0 and np.all(crossings == 0)
    from shoal.apps.cloth.scenes import Drape

    surface = Drape(n=7, size=0.6, sheets=2, gap=0.02).surface(0.26)
    kinds = state["keys"] >> 60
    assert len(state["x"]) == 2 * 49 and {0, 1} & set(kinds.tolist())  # the sheets touch each other
    mesh = ipctk.CollisionMesh(state["x"], surface.edges, surface.triangles)
    assert not ipctk.has_intersections(mesh, state["x"])


def test_a_mesh_from_an_obj_file_drapes_and_a_non_manifold_one_is_one_line(capsys, tmp_path):
    from shoal.apps.cloth.surface import sheet

    s = sheet(5, size=0.4, height=0.27)
    lines = [f"v {x} {y} {z}" for x, y, z in s.vertices] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in s.triangles]
    (tmp_path / "sheet.obj").write_text("\n".join(lines) + "\n")
    rec = run_scenario("cloth-drape", steps=3, nodes=1, workers=1, tiles=2, out=tmp_path / "obj",
                       set=[f"app.mesh=\"{tmp_path / 'sheet.obj'}\"", "run.frame_every=0"])
    assert np.array_equal(rec.state()["x"].shape, (25, 3))
    fan = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\nf 1 2 3\nf 2 1 4\nf 1 2 5\n"  # three faces on one edge
    (tmp_path / "fan.obj").write_text(fan)
    line = one_error_line(capsys, ["run", "cloth-drape", "--steps", "2", "--set",
                                   f"app.mesh=\"{tmp_path / 'fan.obj'}\"", "--out", str(tmp_path / "bad")])
    assert "manifold" in line


def test_the_live_view_gets_every_vertex_and_the_triangles_to_draw_the_mesh(reference):
    from shoal.apps import get_app
    from shoal.config import load_scenario
    from shoal.live.frames import live_frame

    scenario = load_scenario("cloth-drape")
    scenario.override(SMALL)
    app = get_app("cloth").build(scenario.params, STEPS)
    fields, arrays = live_frame(app.frame(reference.state()), STEPS, 0.04)
    assert fields["kept"] == fields["points"] == 169 and "speed" in [c["name"] for c in fields["colourings"]]
    assert "triangles" in fields["extras"]
    assert np.array_equal(arrays["extra:triangles"], app.model.surface.triangles)


def test_a_cloth_run_plays_back_in_the_view_without_tile_boxes(reference):
    """The parts of a mesh have no boxes of cells: the view's index of the run says so (no grid,
    no tile boxes) instead of failing, and its frames carry the mesh."""
    from shoal.view.playback import Playback

    index = Playback(reference.path).index("cloth")
    assert index["hello"]["tiles"] == 6 and index["hello"]["grid"] is None and index["hello"]["tile_lo"] == []
    assert index["frames"] == [0, 4, 8]


def test_a_pair_that_needs_more_layers_than_allowed_stops_the_run_with_the_window_the_pair_and_the_gap(capsys,
                                                                                                      tmp_path):
    line = one_error_line(capsys, ["run", "cloth-drape", "--steps", "3", "--tiles", "4", "--set", "app.n=9",
                                   "--set", "app.height=0.253", "--set", "app.max_layers=2",
                                   "--out", str(tmp_path / "run")])
    assert re.search(r"window 0: contact pair vertex-obstacle \[\d+, 0\] needs more than 2 layers \(gap 0\.003 m\)",
                     line), line
    assert not (tmp_path / "run" / "summary.json").exists()  # stopped, not finished
