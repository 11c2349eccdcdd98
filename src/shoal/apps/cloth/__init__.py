"""Cloth with asynchronous contact (the contact-mechanics paper), registered as ``cloth``.

- :mod:`.surface`: the triangle surface at rest, its stencils, a generated sheet, OBJ input;
- :mod:`.forces`: stretch and bend as compiled kernels, summed per vertex in stencil order;
- :mod:`.model`: the material, lumped masses and kick–drift;
- :mod:`.contact`: closest points of vertex–face, edge–edge and cloth–obstacle pairs, and the
  nested penalty layers' forces;
- :mod:`.obstacles`: kinematic capsules (a sphere, a rod), still or spun with a speed profile;
- :mod:`.broad`: the broad phase, swept boxes in a hashed grid;
- :mod:`.acm`: asynchronous contact mechanics in one piece: collision windows, conservative
  detection along trajectories, layers added with a rollback and dropped after a clean window;
- :mod:`.scenes`: the drape, every number in one place;
- :mod:`.output`: mesh frames for ParaView, a picture, the windows' log as a table and a figure;
- :mod:`.app`: the material stepped on the parts of a mesh partition, bitwise the one-piece
  model on any partition and executor;
- :mod:`.contact_app`: the windows with contact on the parts, detection as jobs between them,
  bitwise the one-piece run on any partition, placement, job policy and executor;
- :mod:`.params`: the ``[app]`` keys of a cloth scenario.
"""

from ..registry import AppSpec, register_app
from .params import ClothParams, build_cloth, cloth_memory

__all__ = ["ClothParams"]

register_app(AppSpec("cloth", ClothParams, build_cloth,
                     "cloth with asynchronous contact (kick-drift, nested penalty layers, collision windows with "
                     "rollback) on mesh partitions, detection as jobs",
                     tiny={"n": 5, "size": 0.2, "height": 0.053, "radius": 0.05, "window": 1},
                     memory=cloth_memory))
