"""FLIP water with a conjugate-gradient pressure solve, 2D and 3D (the Birdshot paper's FLIP
workload, §7).

Modules: :mod:`.params` (the ``[app]`` keys), :mod:`.geometry` (solids, seeding, sources),
:mod:`.transfer` (particle-to-grid, grid-to-particle, advection), :mod:`.grid` (gravity, walls,
divergence, pressure gradient, extrapolation), :mod:`.pcg` (the Poisson operator, MIC(0) on
bricks, brick sums), :mod:`.regions` (grid halos), :mod:`.output` (frames and the solve's
picture), :mod:`.app` (the phases).
"""

from ..registry import AppSpec, register_app
from .app import FlipApp
from .params import FlipParams, flip_memory

__all__ = ["FlipApp", "FlipParams"]

register_app(AppSpec("flip", FlipParams, FlipApp,
                     "FLIP water on a MAC grid, PCG pressure with MIC(0) on bricks, bitwise the same on any tiling",
                     tiny={"dimension": 2, "cells": [36, 36], "domain": [1.0, 1.0], "brick": 4,
                           "fluid": [[0.0, 0.0, 0.35, 0.6]], "solid_spheres": [[0.7, 0.2, 0.08]],
                           "sources": [[0.8, 0.7, 0.9, 0.8, -0.5, 0.0, 0.0, 0.05]], "cg_max_iterations": 200},
                     memory=flip_memory))
