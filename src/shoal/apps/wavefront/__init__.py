"""Lassen's narrow-band wavefront: arrival times of fronts from point sources (the Birdshot
paper's skewed workload).

Modules: :mod:`.params` (the ``[app]`` keys and the scenes' sources), :mod:`.facets` (the front
inside a zone and the nearest point of it), :mod:`.kernels` (the compiled steps of an
iteration), :mod:`.halos` (what a tile sends its neighbours), :mod:`.app` (the phases), :mod:`.native`
(the phases and halos compiled for the native executor), :mod:`.drawing` (frames and pictures).
"""

from ..registry import AppSpec, register_app
from .app import WavefrontApp
from .params import WavefrontParams, wavefront_memory

__all__ = ["WavefrontApp", "WavefrontParams"]

register_app(AppSpec("wavefront", WavefrontParams, WavefrontApp,
                     "Lassen's narrow-band wavefront: arrival times of fronts from point sources",
                     tiny={"cells": [20, 16], "extent": [1.25, 1.0], "sources": [[0.3, 0.4, 0.0]]},
                     memory=wavefront_memory))
