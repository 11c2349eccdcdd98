"""Smoothed particle hydrodynamics on tiles."""

from ..registry import AppSpec, register_app
from .fluidanimate3d import FluidAnimate3DApp, SPH3DParams, sph3d_memory
from .wcsph2d import SPH2DApp, SPH2DParams, sph2d_memory

register_app(AppSpec("sph2d", SPH2DParams, SPH2DApp, "2D weakly compressible SPH (Monaghan; Vertanen's worlds)",
                     tiny={"dx": 0.05, "tank": [1.0, 0.6], "fluid": [[0.0, 0.0, 0.25, 0.5]]}, memory=sph2d_memory))
register_app(AppSpec("sph3d", SPH3DParams, FluidAnimate3DApp,
                     "3D SPH in PARSEC fluidanimate's formulation (Müller et al. 2003)", tiny={"particles": 1500},
                     memory=sph3d_memory))
