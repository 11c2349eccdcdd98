"""Cloth with asynchronous contact (the contact-mechanics paper): work in progress, not yet a
registered app.

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
  model on any partition and executor (no contact yet).
"""
