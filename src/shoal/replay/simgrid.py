"""Export a trace for SimGrid's SMPI trace replay (time-independent traces, TIT).

Mapping (the MPI reference model: one tile per rank, a barrier after every phase):

- rank ``r`` is tile ``r``; host ``node-r`` of a ``<cluster>`` runs it;
- each task becomes ``r compute <flops>`` with ``flops = cost x host speed``;
- the halos a task produces for the next phase become ``r isend <dst> 0 <bytes> 6``, the
  halos it reads ``r irecv <src> 0 <bytes> 6`` (tag 0; datatype 6 is SMPI's code for
  MPI_BYTE), then ``r waitall <requests>``; every phase ends with ``r barrier``;
- with ``sampi=True`` each step is wrapped in SAMPI's ``iteration_in`` / ``iteration_out``
  and ends with ``migrate`` (SAMPI's extension of SMPI; stock SimGrid rejects them).

The platform is one ``<cluster>`` whose per-host links have half the model's latency and
its bandwidth, with an unconstrained backbone: under CM02 (``--cfg=network/model:CM02``,
SMPI's bandwidth and latency factors set to 1) a lone message then takes
``latency + bytes / bandwidth``, as in shoal's model without per-message overhead.
Run it with ``smpirun -np N -platform platform.xml -hostfile hostfile -replay index.txt
--cfg=network/model:CM02 --cfg=smpi/bw-factor:1 --cfg=smpi/lat-factor:1 <smpi_replay binary>``,
or :func:`simgrid_replay`, which finds both programs (:func:`find_smpi`) and returns the
simulated time. On Debian and Ubuntu they come with ``apt-get install libsimgrid-dev``
(``smpirun``, and ``smpireplaymain`` from ``libsimgrid3.*``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from ..cluster import Network
from ..errors import ShoalError
from ..files import write_text
from ..trace import Trace, packed_by

HOST_SPEED = 1e9  # flops per second of every modeled host
# Where packages put SMPI's replay program (Debian's multiarch folders, a source build's prefix).
REPLAYER_GLOBS = ("/usr/lib/*/simgrid/smpireplaymain", "/usr/lib/simgrid/smpireplaymain",
                  "/usr/local/lib/simgrid/smpireplaymain", "/usr/local/lib/*/simgrid/smpireplaymain")


def export_tit(trace: Trace, out: str | Path, network: Network | None = None, sampi: bool = False) -> Path:
    """Write ``index.txt``, one ``rank-<r>.txt`` per tile, ``platform.xml`` and ``hostfile``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    net = network or trace.cluster.network
    T, P = trace.tiling.ntiles, len(trace.slots()[0])  # a loop's phases once per iteration
    steps = trace.steps
    cost = trace.phase_table()
    present = trace.slot_present()
    m = trace.messages
    # Halos read by (step, slot) are sent after the task that packed them: keyed by it.
    producer_step, producer_phase = packed_by(np.searchsorted(steps, m["step"]), trace.slot_of(m), P)
    sends = {}
    for ps, pp, src, dst, nbytes in zip(producer_step, producer_phase, m["src"], m["dst"], m["bytes"], strict=True):
        while ps >= 0 and pp > 0 and not present[ps, pp]:  # after a loop's last iteration: sent by that one
            pp -= 1
        sends.setdefault((int(ps), int(pp)), []).append((int(src), int(dst), int(nbytes)))
    lines = [[f"{r} init"] for r in range(T)]
    first = sends.get((-1, P - 1), [])  # halos of the very first phase
    _exchange(lines, first)
    for s in range(len(steps)):
        for r in range(T):
            if sampi:
                lines[r].append(f"{r} iteration_in")
        for p in np.flatnonzero(present[s]):  # the slots the step ran
            for r in range(T):
                lines[r].append(f"{r} compute {cost[s, p, r] * HOST_SPEED:.6g}")
            _exchange(lines, sends.get((s, p), []))
            for r in range(T):
                lines[r].append(f"{r} barrier")
        for r in range(T):
            if sampi:
                lines[r] += [f"{r} iteration_out", f"{r} migrate"]
    for r in range(T):
        lines[r].append(f"{r} finalize")
        write_text(out / f"rank-{r}.txt", "# version: 1.0\n" + "\n".join(lines[r]) + "\n")
    write_text(out / "index.txt", "".join(f"{(out / f'rank-{r}.txt').resolve()}\n" for r in range(T)))
    write_text(out / "hostfile", "".join(f"node-{r}\n" for r in range(T)))
    write_text(out / "platform.xml", platform_xml(T, net))
    return out


def _exchange(lines: list[list[str]], messages: list[tuple[int, int, int]]) -> None:
    """Post every receive, then every send, then wait: a halo exchange without deadlock."""
    if not messages:
        return
    requests: dict[int, int] = {}
    for src, dst, nbytes in messages:
        lines[dst].append(f"{dst} irecv {src} 0 {nbytes} 6")
        requests[dst] = requests.get(dst, 0) + 1
    for src, dst, nbytes in messages:
        lines[src].append(f"{src} isend {dst} 0 {nbytes} 6")
        requests[src] = requests.get(src, 0) + 1
    for r in sorted(requests):
        lines[r].append(f"{r} waitall {requests[r]}")


def platform_xml(hosts: int, net: Network) -> str:
    if net.overhead_s:
        raise ShoalError("SimGrid's CM02 model has no per-message overhead: export with overhead 0")
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="shoal" prefix="node-" suffix="" radical="0-{hosts - 1}" speed="{HOST_SPEED:.0f}f"
           bw="{net.bandwidth_Bps:.6g}Bps" lat="{net.latency_s / 2:.6g}s"
           bb_bw="{net.bandwidth_Bps * 1000:.6g}Bps" bb_lat="0s"/>
</platform>
"""


def find_smpi() -> tuple[Path, Path] | str:
    """SimGrid's ``smpirun`` and its trace replayer, or a sentence saying which is missing."""
    smpirun = shutil.which("smpirun")
    if smpirun is None:
        return "SimGrid is not installed: no smpirun on PATH (Debian/Ubuntu: apt-get install libsimgrid-dev)"
    found = sorted(p for pattern in REPLAYER_GLOBS for p in Path("/").glob(pattern.lstrip("/")))
    if not found:
        return (f"SimGrid's smpirun is at {smpirun} but its replayer smpireplaymain is in none of "
                f"{', '.join(REPLAYER_GLOBS)}")
    return Path(smpirun), found[0]


def simgrid_replay(folder: str | Path, timeout_s: float = 300.0) -> float:
    """Replay a folder :func:`export_tit` wrote with SimGrid's SMPI; return the simulated time (s).

    Raises
    ------
    ShoalError
        SimGrid is missing, or its replay failed or printed no simulated time.
    """
    folder = Path(folder)
    tools = find_smpi()
    if isinstance(tools, str):
        raise ShoalError(tools)
    smpirun, replayer = tools
    ranks = (folder / "index.txt").read_text().count("\n")
    run = subprocess.run([str(smpirun), "-np", str(ranks), "-platform", "platform.xml", "-hostfile", "hostfile",
                          "-replay", "index.txt", "--cfg=network/model:CM02", "--cfg=smpi/bw-factor:1",
                          "--cfg=smpi/lat-factor:1", str(replayer)],
                         cwd=folder, capture_output=True, text=True, timeout=timeout_s)
    output = run.stdout + run.stderr
    found = re.search(r"Simulation time ([0-9.eE+-]+)", output)
    if run.returncode or not found:
        lines = output.strip().splitlines() or ["no output"]
        # SimGrid's own reason, without its "[host:pid time] file:line: [category]" prefix.
        why = next((x for x in lines if "CRITICAL]" in x or "ERROR]" in x), lines[-1]).split("] ")[-1]
        raise ShoalError(f"{folder}: SimGrid's replay failed (exit {run.returncode}): {why}")
    return float(found.group(1))
