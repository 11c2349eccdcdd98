"""Smoothed particle hydrodynamics on tiles."""

from .. import AppSpec, register_app
from .wcsph2d import SPH2DApp, SPH2DParams

register_app(AppSpec("sph2d", SPH2DParams, SPH2DApp, "2D weakly compressible SPH (Monaghan; Vertanen's worlds)"))
