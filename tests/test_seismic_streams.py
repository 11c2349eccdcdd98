"""Seismograms as an ObsPy Stream and as SAC and miniSEED files: read back with ObsPy, the
samples are the run's (Z up), the headers carry the codes, the receivers' coordinates and
distances from the source and the origin time; bad input is one line and writes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.cli import main
from shoal.errors import ShoalError
from shoal.session import run_scenario

obspy = pytest.importorskip("obspy")

STEPS = 30
SOURCE = (900.0, 1100.0, 600.0)
RECEIVERS = [(1500.0, 1000.0, 0.0), (900.0, 1100.0, 0.0), (300.0, 1900.0, 200.0)]
SMALL = ["app.cells=[24,20,14]", "app.spacing=100.0", "app.absorbing=4", "app.f0=2.5", "app.t0=0.1",
         f"app.source_at={list(SOURCE)}", f"app.receivers={[list(r) for r in RECEIVERS]}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 3D run in float32 with frames every 10 steps, and a 2D one in float64 without frames
    (each its scenario's precision: the kernels the warm-up compiled)."""
    base = tmp_path_factory.mktemp("streams")
    three = run_scenario("seismic-halfspace", steps=STEPS, tiles=4, nodes=1, workers=1,
                         set=[*SMALL, "app.dtype=\"float32\"", "run.frame_every=10"], out=base / "3d")
    two = run_scenario("seismic-layered-2d", steps=STEPS, tiles=3, nodes=1, workers=1,
                       set=["app.cells=[60,24]", "app.absorbing=5", "app.source_at=[700.0,200.0]",
                            "app.receivers=[[1000.0,0.0],[200.0,50.0]]", "app.dtype=\"float64\"",
                            "run.frame_every=0"], out=base / "2d")
    return three, two


def _expected(run):
    final = run.state()
    return final["seismograms"], float(final["dt"])


def test_the_stream_holds_every_receiver_and_component_with_codes_coordinates_and_distance(runs):
    from shoal.apps.seismic.streams import to_obspy

    run = runs[0]
    seis, dt = _expected(run)
    stream = to_obspy(run.path)
    band = "H" if 1 / dt >= 80 else "B"
    assert [t.id for t in stream] == [f"XX.R{r:04d}..{band}X{c}" for r in range(3) for c in "XYZ"]
    for k, trace in enumerate(stream):
        r, c = divmod(k, 3)
        st = trace.stats
        assert st.starttime == obspy.UTCDateTime(0) and st.delta == dt and st.npts == STEPS + 1
        # Z points up: the run's vz (depth down) with its sign turned; bit for bit otherwise
        np.testing.assert_array_equal(trace.data, -seis[r, :, 2] if c == 2 else seis[r, :, c])
        assert trace.data.dtype == np.float64 and np.array_equal(trace.data.astype(np.float32), trace.data)
        x, y, z = RECEIVERS[r]  # (a float32 run's values, in float64)
        assert (st.coordinates.x, st.coordinates.y, st.coordinates.z, st.coordinates.elevation) == (x, y, z, -z)
        assert st.distance == pytest.approx(np.hypot(x - SOURCE[0], y - SOURCE[1]), abs=1e-9)
    assert stream[3].stats.distance == 0.0  # the receiver right above the source
    assert np.abs(stream.select(channel="*Z")[0].data).max() > 0  # the wave reached the first receiver


def test_the_origin_time_and_codes_can_be_set(runs):
    from shoal.apps.seismic.streams import to_obspy

    stream = to_obspy(runs[0].path, origin_time="2007-07-16T01:13:22", network="SH", location="00")
    assert stream[0].stats.starttime == obspy.UTCDateTime(2007, 7, 16, 1, 13, 22)
    assert stream[0].id.startswith("SH.R0000.00.")
    with pytest.raises(ShoalError, match="at most 2 characters"):
        to_obspy(runs[0].path, network="SHOAL")
    with pytest.raises(ShoalError, match="not a time ObsPy reads"):
        to_obspy(runs[0].path, origin_time="yesterday")


def test_a_2d_run_has_no_y_traces_and_reads_from_its_final_state(runs):
    from shoal.apps.seismic.streams import to_obspy

    run = runs[1]
    assert not (run.path / "frames" / "seismograms.npz").exists()  # no frames: the final state
    seis, _ = _expected(run)
    stream = to_obspy(run.path)
    assert [t.stats.channel[-1] for t in stream] == ["X", "Z", "X", "Z"]
    np.testing.assert_array_equal(stream[3].data, -seis[1, :, 2])
    assert not np.array_equal(stream[0].data.astype(np.float32), stream[0].data)  # a float64 run's values
    assert [t.stats.distance for t in stream[::2]] == [300.0, 500.0]


@pytest.mark.filterwarnings("ignore:Sample spacing read from SAC file")
def test_sac_files_read_back_with_the_samples_and_headers(runs, tmp_path):
    run = runs[0]
    seis, dt = _expected(run)
    assert main(["export", str(run.path), "--format", "sac", "--out", str(tmp_path / "sac"),
                 "--origin-time", "2020-01-01T00:00:00"]) == 0
    files = sorted((tmp_path / "sac").iterdir())
    assert len(files) == 9 and files[0].name.startswith("XX.R0000..") and files[0].suffix == ".sac"
    for r, (x, y, z) in enumerate(RECEIVERS):
        for c, axis in enumerate("XYZ"):
            [path] = (tmp_path / "sac").glob(f"XX.R{r:04d}..?X{axis}.sac")
            trace = obspy.read(str(path), format="SAC")[0]
            sign = -1.0 if axis == "Z" else 1.0
            np.testing.assert_array_equal(trace.data, (sign * seis[r, :, c]).astype(np.float32))  # SAC: float32
            sac = trace.stats.sac
            assert trace.stats.starttime == obspy.UTCDateTime(2020, 1, 1)
            assert sac.delta == pytest.approx(dt, rel=1e-7)  # float32 in the file (ObsPy rounds stats.delta to 1 us)
            assert sac.o == 0.0 and sac.b == 0.0 and sac.iztype == 11
            assert sac.dist == pytest.approx(np.hypot(x - SOURCE[0], y - SOURCE[1]) / 1000, rel=1e-6)
            assert sac.stdp == pytest.approx(z) and sac.evdp == pytest.approx(SOURCE[2] / 1000)
            got = [sac[f"user{k}"] for k in range(6)]
            np.testing.assert_allclose(got, [x, y, z, *SOURCE], rtol=1e-6)
            assert sac.kevnm.strip() == "seismic-halfspace"[:16]  # SAC keeps 16 characters


def test_miniseed_reads_back_bit_for_bit(runs, tmp_path):
    run = runs[1]
    seis, dt = _expected(run)
    assert main(["export", str(run.path), "--format", "mseed", "--out", str(tmp_path / "ms"), "--network", "SH"]) == 0
    stream = obspy.read(str(tmp_path / "ms" / "seismograms.mseed"))
    assert [t.id for t in stream] == [f"SH.R{r:04d}..{t}" for r in range(2)
                                      for t in (f"{stream[0].stats.channel[0]}XX", f"{stream[0].stats.channel[0]}XZ")]
    for k, trace in enumerate(stream):
        r, c = divmod(k, 2)
        expected = -seis[r, :, 2] if c else seis[r, :, 0]
        assert trace.data.dtype == expected.dtype and trace.data.tobytes() == expected.tobytes()
        assert trace.stats.starttime == obspy.UTCDateTime(0) and trace.stats.delta == pytest.approx(dt)


@pytest.mark.parametrize("args, expected", [
    (["--format", "sac", "--origin-time", "soon"], "error: origin time 'soon' is not a time ObsPy reads"),
    (["--format", "sac", "--network", "ABC"], "error: network 'ABC' and location '' codes take at most 2"),
])
def test_bad_export_input_is_one_line_and_writes_nothing(runs, tmp_path, capsys, args, expected):
    out = tmp_path / "out"
    assert main(["export", str(runs[0].path), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not out.exists()
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal
        main(["export", str(runs[0].path), "--format", "segy", "--out", str(out)])
    assert exit_.value.code == 2 and "invalid choice: 'segy'" in capsys.readouterr().err
    assert not out.exists()


def test_a_folder_that_is_not_a_seismic_run_is_refused(tmp_path, capsys):
    other = run_scenario("synthetic-hotspot", steps=2, tiles=4, nodes=1, set=["app.grid=[16,16]"],
                         out=tmp_path / "synthetic")
    capsys.readouterr()  # what the run said (a busy host's warning among it) is not the export's
    for folder, expected in ((other.path, "a run of app 'synthetic', not seismic"),
                             (tmp_path / "nowhere", "no such run folder or seismograms file"),
                             (tmp_path, "neither a finished seismic run")):
        assert main(["export", str(folder), "--format", "mseed", "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "out").exists()


def test_without_obspy_the_stream_is_refused_in_one_line(runs, monkeypatch):
    from shoal.apps.seismic.streams import to_obspy

    monkeypatch.setitem(__import__("sys").modules, "obspy", None)  # as if it were not installed
    with pytest.raises(ShoalError, match=r"need ObsPy: pip install shoal\[obspy\]"):
        to_obspy(runs[0].path)
