"""Elastic waves in a layered crust with absorbing boundaries (the SAMPI paper's Ondes3D).

Modules: :mod:`.params` (the ``[app]`` keys), :mod:`.medium` (the layered medium as the
scheme's coefficients, and the time step), :mod:`.cpml` (the absorbing layers' profiles),
:mod:`.source` (wavelets and where sources enter the grid), :mod:`.kernels` (the compiled
stencils), :mod:`.app` (the phases), :mod:`.analytic` (exact solutions for verification).
"""

from ..registry import AppSpec, register_app
from .app import SeismicApp
from .params import SeismicParams, seismic_memory

__all__ = ["SeismicApp", "SeismicParams"]

register_app(AppSpec("seismic", SeismicParams, SeismicApp,
                     "elastic waves (velocity-stress, staggered grid) in a layered crust with C-PML absorbing layers",
                     tiny={"cells": [20, 16, 12], "spacing": 100.0, "absorbing": 3, "source_at": [1000.0, 800.0, 600.0],
                           "f0": 2.0, "receivers": [[600.0, 800.0, 0.0]]},
                     memory=seismic_memory,
                     layout={"vz_section": ("down", "signed"), "speed_section": ("down",), "vz_surface": ("signed",),
                             "seismograms": ("traces",)}))
