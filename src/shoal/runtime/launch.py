"""Which processes a program was started as: one process, or MPI ranks under a launcher.

Serial use never imports mpi4py: only :func:`current_team` does, and only under ``mpiexec``.
"""

from __future__ import annotations

import os

from .team import Team

# Variables that MPI launchers set in every process they start.
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS")

# Open MPI 5 settings that keep a job on one host off the network: ranks talk through shared
# memory (no TCP, libfabric or UCX transport, whose start-up also probes every interface and
# costs about a second), and each rank reaches its launcher's PMIx server on the loopback
# interface. The launcher's own daemon channel keeps listening: it is only used between hosts.
ONE_HOST_OPEN_MPI = {
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl": "self,sm",
    "OMPI_MCA_btl_tcp_if_include": "lo",  # should someone add the tcp transport back
    "PMIX_MCA_ptl_tcp_if_include": "lo",
}


def launched_by_mpi() -> bool:
    """Whether this process was started by ``mpiexec`` (or another MPI launcher)."""
    return any(v in os.environ for v in LAUNCHER_VARIABLES)


def current_team() -> Team:
    """The MPI team when started by ``mpiexec``, else one process."""
    if launched_by_mpi():
        from .mpi import MPITeam  # only here: mpi4py is imported under mpiexec alone

        return MPITeam()
    return Team()
