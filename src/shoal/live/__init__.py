"""What a run sends a live viewer: its frames, loads and placements over a local socket.

This is the run's side of the live view, below the session that attaches it (:mod:`.feed`,
never waiting for the viewer); what a frame holds is chosen in :mod:`.frames`, and every
message has one layout (:mod:`.protocol`), which the viewer's server (:mod:`shoal.view`) reads.
"""
