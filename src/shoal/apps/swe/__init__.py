"""Shallow water on dynamically adaptive root blocks (the invasive-balancing paper's workload).

Modules: :mod:`.params` (the ``[app]`` keys), :mod:`.setups` (analytic beds and initial
states), :mod:`.inputs` (beds and water users give: files and Python callables),
:mod:`.analytic` (exact solutions for verification), :mod:`.boundary` (the sides' ghost
states), :mod:`.kernels` (fluxes, ghosts and the update, compiled), :mod:`.blocks` (a tile's
root blocks and neighbours), :mod:`.regrid` (refining and coarsening a block), :mod:`.app`
(the phases).
"""

from ..registry import AppSpec, register_app
from .app import SWEApp
from .params import SWEParams, swe_memory

__all__ = ["SWEApp", "SWEParams"]

register_app(AppSpec("swe", SWEParams, SWEApp,
                     "shallow water over bathymetry on root blocks that refine where the surface moves",
                     tiny={"blocks": [9, 6], "block": 4, "extent": [360.0, 240.0], "column": [150.0, 120.0, 50.0, 2.0],
                           "max_level": 1, "regrid_every": 2, "order": 2, "threshold": 0.05},
                     memory=swe_memory, layout={"eta": ("signed",)}))
