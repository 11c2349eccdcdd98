"""Pictures and viewer files of arrays, below the floors that draw with them.

- :mod:`~shoal.graphics.canvas` — figures on their own Agg canvases, bounded in size, saved
  atomically, without touching the caller's matplotlib backend;
- :mod:`~shoal.graphics.drawing` — the default picture of an app's frame;
- :mod:`~shoal.graphics.vtk` — compressed VTK XML files and ParaView series, which ParaView and
  VisIt read directly.

Apps draw their own frames with these; :mod:`shoal.report` draws whole run folders.
"""
