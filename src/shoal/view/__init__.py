"""The live view: a run's physics and load, watched in a browser while it goes.

A run hands its frames to a separate viewer process through a local socket (the run's side is
:mod:`shoal.live`, never waiting for the viewer); the viewer serves a page on the loopback
interface and pushes the frames to it over WebSocket (:mod:`.server`); the page draws them
itself from float32 arrays. Every message on both legs has one layout
(:mod:`shoal.live.protocol`).
"""
