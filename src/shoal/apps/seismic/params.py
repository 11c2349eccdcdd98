"""Parameters of the seismic app (the ``[app]`` table of a scenario), checked up front.

Coordinates: ``x`` and ``y`` horizontal, ``z`` depth (positive down), in metres, with the
origin at the first normal-stress node; the top of the grid (``z = 0``) is the surface. Cells are
cubes of side ``spacing``. A 2D run (``cells = [nx, nz]``) is the x-z plane with nothing varying
along y (plane strain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import ShoalError
from ..checks import choice, integer, number, vector

SOURCES = ("force", "explosion", "moment")
WAVELETS = ("ricker", "gaussian", "dgaussian")
TOPS = ("free", "absorbing", "rigid")
DTYPES = ("float32", "float64")


@dataclass
class SeismicParams:
    """Parameters of the seismic app: the grid, the layered medium, the absorbing layers, the
    source and the receivers. Lengths in metres, times in seconds, speeds in m/s, densities in
    kg/m^3, forces in N and moments in N m."""

    cells: list[int] = field(default_factory=lambda: [64, 64, 32])  # [nx, ny, nz], or [nx, nz] in 2D
    spacing: float = 100.0  # the side of a cell (m)
    scale: float = 1.0  # cells per axis times scale, spacing divided by it: the same domain, coarser or finer
    order: int = 4  # spatial order: 4 (9/8, -1/24) or 2
    dtype: str = "float32"
    cfl: float = 0.9  # dt as a fraction of the scheme's stability limit on the fastest layer
    dt: float = 0.0  # a fixed time step (s) instead; refused above the stability limit
    # the medium: layers from the surface down, each [top depth, vp, vs, rho]; the first starts at 0
    layers: list[list[float]] = field(default_factory=lambda: [[0.0, 6000.0, 3464.0, 2700.0]])
    gradients: list[list[float]] = field(default_factory=list)  # per layer [dvp/dz, dvs/dz, drho/dz], or none
    # boundaries
    top: str = "free"  # "free" (stress imaging), "absorbing" (a C-PML like the other sides) or "rigid"
    absorbing: int = 10  # C-PML width in cells on every other side (0: rigid walls)
    reflection: float = 1e-3  # the C-PML's target reflection coefficient
    kappa_max: float = 1.0  # the C-PML's coordinate stretch at the outer edge
    # the source, at a position in metres (2D: [x, z])
    source: str = "force"
    source_at: list[float] = field(default_factory=lambda: [3200.0, 3200.0, 1600.0])
    amplitude: float = 1e15  # N for a force, N m for a moment (the wavelet is the moment rate's shape)
    direction: list[float] = field(default_factory=lambda: [0.0, 0.0, 1.0])  # a force's direction
    moment: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])  # xx yy zz xy xz yz
    wavelet: str = "ricker"
    f0: float = 1.0  # the wavelet's dominant frequency (Hz)
    t0: float = 0.0  # the wavelet's centre (s); 0: 1.2 / f0
    receivers: list[list[float]] = field(default_factory=list)  # positions in metres
    skip_zero: bool = True  # skip regions whose inputs are all exactly zero (changes no bit)
    # the fewest grid points per shortest wavelength the run accepts; 0: the scheme's own need
    # (5 at order 4, 10 at order 2; see .medium.check_resolution)
    points_per_wavelength: float = 0.0

    # ----- derived -------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """2 or 3."""
        return len(self.cells)

    @property
    def shape(self) -> tuple[int, int, int]:
        """Cells along x, y and z after ``scale`` (ny is 1 in 2D)."""
        n = [max(1, round(c * self.scale)) for c in self.cells]
        return (n[0], 1, n[1]) if self.ndim == 2 else (n[0], n[1], n[2])

    @property
    def dx(self) -> float:
        """The side of a cell after ``scale`` (m)."""
        return self.spacing / self.scale

    @property
    def extent(self) -> tuple[float, float, float]:
        """Span of the normal-stress nodes along x, y and z (m)."""
        return tuple((n - 1) * self.dx for n in self.shape)

    def point(self, values) -> tuple[float, float, float]:
        """A 2- or 3-component position as ``(x, y, z)``."""
        return (float(values[0]), 0.0, float(values[1])) if self.ndim == 2 else tuple(map(float, values))

    @property
    def delay(self) -> float:
        """The wavelet's centre (s)."""
        return self.t0 if self.t0 > 0 else 1.2 / self.f0

    def pml_widths(self) -> tuple[int, int, int, int, int, int]:
        """C-PML cells at x-, x+, y-, y+, z top and z bottom (none along y in 2D)."""
        w = int(self.absorbing)
        wy = 0 if self.ndim == 2 else w
        return (w, w, wy, wy, w if self.top == "absorbing" else 0, w)

    # ----- checks --------------------------------------------------------------------------------
    def validate(self) -> None:
        """Refuse parameters that would run and mean nothing, with one line naming the key."""
        if not (isinstance(self.cells, (list, tuple)) and len(self.cells) in (2, 3)):
            raise ShoalError(f"app.cells must be [nx, ny, nz] or, in 2D, [nx, nz]; got {self.cells!r}")
        for n in self.cells:
            integer("cells", n, low=1)
        for name in ("spacing", "scale", "cfl", "dt", "reflection", "kappa_max", "amplitude", "f0", "t0",
                     "points_per_wavelength"):
            number(name, getattr(self, name))
        choice("order", self.order, (2, 4))
        choice("dtype", self.dtype, DTYPES)
        choice("top", self.top, TOPS)
        choice("source", self.source, SOURCES)
        choice("wavelet", self.wavelet, WAVELETS)
        integer("absorbing", self.absorbing, low=0)
        if not isinstance(self.skip_zero, bool):
            raise ShoalError(f"app.skip_zero must be true or false, got {self.skip_zero!r}")
        if self.spacing <= 0 or self.scale <= 0 or self.f0 <= 0:
            raise ShoalError("app.spacing, app.scale and app.f0 must be positive")
        if not 0 < self.cfl <= 1:
            raise ShoalError(f"app.cfl must be in (0, 1] (a fraction of the stability limit), got {self.cfl}")
        if self.dt < 0 or self.t0 < 0 or self.points_per_wavelength < 0:
            raise ShoalError("app.dt, app.t0 and app.points_per_wavelength must be >= 0 (0: derived)")
        if not 0 < self.reflection < 1:
            raise ShoalError(f"app.reflection must be in (0, 1), got {self.reflection}")
        if self.kappa_max < 1:
            raise ShoalError(f"app.kappa_max must be >= 1, got {self.kappa_max}")
        nx, ny, nz = self.shape
        halo = self.order // 2
        if min(nx, nz, *(() if self.ndim == 2 else (ny,))) < 2 * halo:
            raise ShoalError(f"the grid needs at least {2 * halo} cells per axis at order {self.order}, "
                             f"got {list(self.shape)}")
        w = self.pml_widths()
        for axis, n, lo, hi in (("x", nx, w[0], w[1]), ("y", ny, w[2], w[3]), ("z", nz, w[4], w[5])):
            if lo + hi >= n:
                raise ShoalError(f"app.absorbing ({self.absorbing} cells) leaves no interior along {axis}: "
                                 f"the domain has {n} cells")
        self._validate_medium()
        self._validate_source()

    def _validate_medium(self) -> None:
        if not (isinstance(self.layers, (list, tuple)) and self.layers):
            raise ShoalError(f"app.layers must be a list of [top depth, vp, vs, rho]; got {self.layers!r}")
        for layer in self.layers:
            vector("layers entry", layer, 4)
        if self.gradients:
            if len(self.gradients) != len(self.layers):
                raise ShoalError(f"app.gradients needs one [dvp/dz, dvs/dz, drho/dz] per layer: "
                                 f"{len(self.gradients)} for {len(self.layers)} layers")
            for g in self.gradients:
                vector("gradients entry", g, 3)
        tops = [layer[0] for layer in self.layers]
        if tops[0] != 0 or any(b <= a for a, b in zip(tops, tops[1:], strict=False)):
            raise ShoalError(f"app.layers must start at depth 0 and go down, got tops {tops}")
        depth = self.depths()
        vp, vs, rho = self.medium(depth)
        for what, bad in (("a negative or zero density", rho <= 0), ("a P speed that is not positive", vp <= 0),
                          ("a negative S speed", vs < 0),
                          # lambda = rho (vp^2 - 2 vs^2) < 0 makes the bulk modulus negative (vs/vp > sqrt(3)/2)
                          ("an S speed of at least sqrt(3)/2 of its P speed (a negative bulk modulus)",
                           vs >= math.sqrt(3) / 2 * vp)):
            if np.any(bad):
                k = int(np.argmax(bad))
                raise ShoalError(f"app.layers: the medium has {what} at depth {depth[k]:g} m "
                                 f"(vp {vp[k]:g}, vs {vs[k]:g}, rho {rho[k]:g})")

    def _validate_source(self) -> None:
        width = self.ndim
        vector("source_at", self.source_at, width)
        vector("direction", self.direction, 3)
        vector("moment", self.moment, 6)
        x, y, z = self.point(self.source_at)
        if not all(0 <= c <= e for c, e in zip((x, y, z), self.extent, strict=True)):
            raise ShoalError(f"app.source_at {list(self.source_at)} is outside the domain "
                             f"(0..{self.extent[0]:g}, 0..{self.extent[1]:g}, 0..{self.extent[2]:g} m)")
        if self.source == "force" and not any(self.direction):
            raise ShoalError("app.direction of a force must not be zero")
        if not isinstance(self.receivers, (list, tuple)):
            raise ShoalError(f"app.receivers must be a list of positions, got {self.receivers!r}")
        for r in self.receivers:
            vector("receivers entry", r, width)
            pos = self.point(r)
            if not all(0 <= c <= e for c, e in zip(pos, self.extent, strict=True)):
                raise ShoalError(f"app.receivers entry {list(r)} is outside the domain")

    # ----- the medium ----------------------------------------------------------------------------
    def depths(self) -> np.ndarray:
        """Depth of every normal-stress level (m)."""
        return np.arange(self.shape[2]) * self.dx

    def medium(self, z) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """P speed, S speed and density at depths ``z`` (m): each layer's values at its top,
        plus its gradient times the depth below it."""
        z = np.asarray(z, dtype=float)
        tops = np.array([layer[0] for layer in self.layers])
        k = np.clip(np.searchsorted(tops, z, side="right") - 1, 0, len(tops) - 1)
        values = np.array([layer[1:] for layer in self.layers], dtype=float)[k]
        if self.gradients:
            values = values + np.array(self.gradients, dtype=float)[k] * (z - tops[k])[..., None]
        return values[..., 0], values[..., 1], values[..., 2]


def seismic_memory(p: SeismicParams) -> int:
    """Bytes of a run's state: nine fields with two ghost layers, the memory variables of the
    absorbing layers (six per layer cell) and a copy for halos, at the run's precision. The
    seismograms are not counted: they grow with the steps run (24 bytes per receiver and step),
    not with the steps planned."""
    nx, ny, nz = p.shape
    g = p.order // 2
    size = 4 if p.dtype == "float32" else 8
    cells = (nx + 2 * g) * (ny + 2 * g) * (nz + 2 * g)
    return int(size * cells * (9 + 6 + 2))
