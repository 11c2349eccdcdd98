"""The live view's message layout and what its frames hold."""

import socket
import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from shoal.errors import ShoalError
from shoal.live import protocol
from shoal.live.frames import MAX_BYTES, kept_particles, live_frame

ARRAYS = st.dictionaries(
    st.text("abcdefgh:_", min_size=1, max_size=8),
    st.one_of(
        hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5), elements=st.floats(-1e30, 1e30)),
        hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5),
                   elements=st.integers(-2**31, 2**31 - 1)),
        hnp.arrays(np.uint8, hnp.array_shapes(min_dims=1, max_dims=1, max_side=7)),
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(arrays=ARRAYS, step=st.integers(0, 10**9), label=st.text(max_size=20))
def test_a_message_round_trips_and_every_array_is_aligned(arrays, step, label):
    message = protocol.encode("frame", {"step": step, "label": label}, arrays)
    header, back = protocol.decode(message)
    assert header["type"] == "frame" and header["step"] == step and header["label"] == label
    assert set(back) == set(arrays)
    for spec in header["arrays"]:
        assert spec["offset"] % 8 == 0  # what a typed array in the page needs
    for name, a in arrays.items():
        expected = a.astype(np.float32) if a.dtype.kind == "f" else a
        assert back[name].shape == a.shape
        np.testing.assert_array_equal(back[name], expected)
    (n,) = struct.unpack_from("<I", message)
    assert (4 + n) % 8 == 0


def test_non_finite_header_numbers_travel_as_null():
    header, _ = protocol.decode(protocol.encode("loads", {"lif": float("nan"), "x": [1.0, float("inf")]}))
    assert header["lif"] is None and header["x"] == [1.0, None]


@pytest.mark.parametrize("bad", [b"", b"\x05\x00\x00\x00{}", struct.pack("<I", 2) + b"[]",
                                 struct.pack("<I", 60) + b'{"type":"f","arrays":[{"name":"a","dtype":"f4","shape":[9],'
                                 b'"offset":64}]}'.ljust(60) + b"\x00" * 8,
                                 struct.pack("<I", 60) + b'{"type":"f","arrays":[{"name":"a","dtype":"f8","shape":[1],'
                                 b'"offset":64}]}'.ljust(60) + b"\x00" * 8])
def test_a_malformed_message_is_one_clear_error(bad):
    with pytest.raises(ShoalError, match="live view"):
        protocol.decode(bad)


def test_messages_cross_a_socket_whole_and_end_of_stream_is_none():
    a, b = socket.socketpair()
    big = protocol.encode("frame", {}, {"u": np.arange(300_000, dtype=np.float64)})  # larger than a socket buffer
    sender = threading.Thread(target=lambda: (protocol.send(a, big), protocol.send(a, b"x"), a.close()))
    sender.start()
    assert protocol.receive(b) == big
    assert protocol.receive(b) == b"x"
    assert protocol.receive(b) is None
    sender.join()


def test_an_oversized_length_is_refused_before_reading_it():
    a, b = socket.socketpair()
    a.sendall(struct.pack("<Q", protocol.MAX_MESSAGE_BYTES + 1))
    with pytest.raises(ShoalError, match="at most"):
        protocol.receive(b)


# ----- frames ----------------------------------------------------------------------------------------
def test_the_kept_particles_are_the_same_ids_whatever_their_order_and_spread_evenly():
    rng = np.random.default_rng(1)
    ids = np.arange(1_000_000)
    keep = kept_particles(ids, 100_000)
    assert abs(keep.sum() - 100_000) < 1_500
    shuffled = rng.permutation(ids)
    assert set(shuffled[kept_particles(shuffled, 100_000)]) == set(ids[keep])
    # consecutive ids (a row of particles) are thinned evenly, not in stripes
    per_block = keep.reshape(1000, 1000).sum(axis=1)
    assert per_block.min() > 60 and per_block.max() < 140


def test_a_particle_frame_keeps_within_the_budget_and_colours_by_speed_density_pressure():
    n = 300_000
    rng = np.random.default_rng(0)
    frame = {"id": np.arange(n), "x": rng.random((n, 3)), "v": np.ones((n, 3)), "rho": np.full(n, 1000.0),
             "p": np.zeros(n), "kind": np.zeros(n, np.int8), "m": np.ones(n), "time": np.float64(0.5)}
    fields, arrays = live_frame(frame, 7, 0.5)
    assert fields["points"] == n and fields["dims"] == 3
    assert 0 < fields["kept"] == len(arrays["x"]) == len(arrays["id"])
    assert arrays["x"].shape[1] == 2  # the x-y projection
    assert [c["name"] for c in fields["colourings"]] == ["speed", "density", "pressure"]
    np.testing.assert_allclose(arrays["point:speed"], np.sqrt(3.0))
    assert sum(a.nbytes for a in protocol.decode(protocol.encode("frame", fields, arrays))[1].values()) <= MAX_BYTES
    assert "extra:m" not in arrays and fields["meta"] == {"time": 0.5}


def test_grids_are_strided_to_the_budget_and_3d_grids_become_middle_slices():
    big = np.arange(2048 * 2048, dtype=np.float64).reshape(2048, 2048)
    fields, arrays = live_frame({"eta": big, "cube": np.ones((8, 6, 4)), "receivers": np.ones((5, 3))}, 0, 0.0)
    names = [g["name"] for g in fields["grids"]]
    assert names == ["eta", "cube[z]", "cube[y]"]
    stride = fields["grids"][0]["stride"]
    assert stride > 1 and sum(a.nbytes for a in arrays.values() if a.dtype == np.float32) <= MAX_BYTES * 1.01
    np.testing.assert_array_equal(np.asarray(arrays["grid:eta"], np.float64), big[::stride, ::stride])
    assert arrays["grid:cube[z]"].shape == np.ones((8, 6))[::stride, ::stride].shape
    assert arrays["grid:cube[y]"].shape == np.ones((8, 4))[::stride, ::stride].shape
    assert fields["extras"] == ["receivers"]  # a list of vectors, not a grid


def test_an_apps_layout_marks_its_named_grids_and_only_those():
    frame = {"vz_section": np.ones((8, 6)), "other": np.ones((8, 6)), "cube": np.ones((8, 6, 5))}
    fields, _ = live_frame(frame, 0, 0.0, layout={"vz_section": ("down", "signed"), "cube": ("signed",)})
    flags = {g["name"]: (g["down"], g["signed"]) for g in fields["grids"]}
    assert flags == {"vz_section": (True, True), "other": (False, False), "cube[z]": (False, False),
                     "cube[y]": (False, False)}


def test_an_apps_traces_travel_as_extras_named_in_the_header():
    frame = {"seismograms": np.ones((3, 5, 3)), "seismogram_times": np.arange(5.0), "receivers": np.ones((3, 3))}
    fields, arrays = live_frame(frame, 0, 0.0, layout={"seismograms": ("traces",)})
    assert fields["traces"] == ["seismograms"]
    assert arrays["extra:seismograms"].shape == (3, 5, 3) and arrays["extra:seismogram_times"].shape == (5,)


def test_every_registered_layout_names_grids_its_app_draws():
    from shoal.apps import all_apps

    for spec in all_apps().values():
        for name, hints in spec.layout.items():
            assert set(hints) <= {"down", "signed", "traces"}, (spec.name, name)
