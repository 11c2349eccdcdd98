"""Smoothed particle hydrodynamics on tiles."""

from .. import AppSpec, register_app
from .fluidanimate3d import FluidAnimate3DApp, SPH3DParams
from .wcsph2d import SPH2DApp, SPH2DParams

register_app(AppSpec("sph2d", SPH2DParams, SPH2DApp, "2D weakly compressible SPH (Monaghan; Vertanen's worlds)"))
register_app(AppSpec("sph3d", SPH3DParams, FluidAnimate3DApp,
                     "3D SPH in PARSEC fluidanimate's formulation (Müller et al. 2003)"))
