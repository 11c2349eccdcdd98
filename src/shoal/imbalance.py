"""The load-imbalance factor (LIF) and Birdshot's model of it.

``LIF = max(load) / mean(load) - 1`` (Birdshot Eq. 1). In Birdshot's model (§5.1), ``n``
nodes get ``s`` tiles each and every tile is busy with probability ``p``, so the busy tiles of
a node follow the binomial ``B(s, p)`` and the most loaded node holds ``M = max`` of ``n``
such draws. This module gives E[LIF] three ways: Birdshot's closed-form approximation (Eq. 2),
the exact value of that model, and a Monte Carlo estimate under either the model or the real
placement (exactly ``s`` tiles per node drawn without replacement from a fixed set of busy
tiles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ShoalError


def lif(loads, present=None) -> np.ndarray | float:
    """Load-imbalance factor of per-node loads along the last axis (0 when all are idle).

    Parameters
    ----------
    loads : array_like
        Per-node loads in any unit (seconds, work); a 1-D vector gives a float, a stack of
        vectors an array of one LIF per vector.
    present : array_like of bool, optional
        Which nodes count, broadcast against ``loads``: a node that held no worker threads (a
        run resumed on fewer nodes, or before more joined it) is absent, and neither its load
        nor its share of the mean enters the factor. Default: every node.

    Raises
    ------
    ShoalError
        For an empty last axis.
    """
    loads = np.asarray(loads, dtype=np.float64)
    if loads.shape[-1] == 0:
        raise ShoalError("LIF of an empty load vector")
    if present is None or np.all(present):
        mean = loads.mean(axis=-1)
        peak = loads.max(axis=-1)
    else:
        present = np.broadcast_to(np.asarray(present, dtype=bool), loads.shape)
        mean = np.where(present, loads, 0.0).sum(axis=-1) / np.maximum(present.sum(axis=-1), 1)
        peak = np.where(present, loads, 0.0).max(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(mean > 0, peak / np.where(mean > 0, mean, 1.0) - 1.0, 0.0)
    return float(out) if out.ndim == 0 else out


MAX_NODES = 10**6  # ten times the largest machines built: a larger count is a typo, not a cluster
MAX_TILES_PER_NODE = 1 << 20  # the model's arrays hold s + 1 values; tiles_per_node_for searches this far


def _check_model(nodes: int, tiles_per_node: int, busy: float) -> None:
    if not 1 <= int(nodes) <= MAX_NODES:
        raise ShoalError(f"nodes must be between 1 and {MAX_NODES:,}, got {nodes:,}")
    if not 1 <= int(tiles_per_node) <= MAX_TILES_PER_NODE:
        raise ShoalError(f"tiles per node must be between 1 and {MAX_TILES_PER_NODE:,}, got {tiles_per_node:,}")
    if not 0.0 < busy <= 1.0:
        raise ShoalError(f"busy fraction must be in (0, 1], got {busy}")


def expected_lif_approx(nodes: int, tiles_per_node: int, busy: float) -> float:
    """Birdshot's Eq. 2: ``sqrt(2 (1/p - 1)) * sqrt(log n / s)``, the closed-form
    approximation of E[LIF] (0 for one node).

    Parameters
    ----------
    nodes : int
        ``n``, at least 1.
    tiles_per_node : int
        ``s``, at least 1.
    busy : float
        ``p``, the probability that a tile is busy, in (0, 1].

    Raises
    ------
    ShoalError
        If a parameter is out of range.
    """
    _check_model(nodes, tiles_per_node, busy)
    return float(np.sqrt(2.0 * (1.0 / busy - 1.0)) * np.sqrt(np.log(nodes) / tiles_per_node))


def max_busy_cdf(nodes: int, tiles_per_node: int, busy: float) -> np.ndarray:
    """``P(M <= k)`` for ``k = 0..s``: the CDF of the most loaded node's busy tiles.

    Parameters
    ----------
    nodes : int
        ``n``, at least 1.
    tiles_per_node : int
        ``s``, at least 1.
    busy : float
        ``p``, the probability that a tile is busy, in (0, 1].

    Returns
    -------
    ndarray
        ``s + 1`` probabilities, non-decreasing, the last one 1.

    Raises
    ------
    ShoalError
        If a parameter is out of range.
    """
    from scipy.stats import binom  # here, not on import: scipy.stats takes a second to load

    _check_model(nodes, tiles_per_node, busy)
    k = np.arange(tiles_per_node + 1)
    return binom.cdf(k, tiles_per_node, busy) ** nodes


def expected_lif_exact(nodes: int, tiles_per_node: int, busy: float) -> float:
    """E[LIF] of Birdshot's binomial model, exactly: ``E[M] = sum_k (1 - F(k)^n)`` and
    ``E[LIF] = E[M] / (p s) - 1``.

    Parameters
    ----------
    nodes : int
        ``n``, at least 1.
    tiles_per_node : int
        ``s``, at least 1.
    busy : float
        ``p``, the probability that a tile is busy, in (0, 1].

    Raises
    ------
    ShoalError
        If a parameter is out of range.
    """
    cdf = max_busy_cdf(nodes, tiles_per_node, busy)
    expected_max = float(np.sum(1.0 - cdf[:-1]))
    return expected_max / (busy * tiles_per_node) - 1.0


def lif_distribution(nodes: int, tiles_per_node: int, busy: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact distribution of LIF in the binomial model.

    Parameters
    ----------
    nodes : int
        ``n``, at least 1.
    tiles_per_node : int
        ``s``, at least 1.
    busy : float
        ``p``, the probability that a tile is busy, in (0, 1].

    Returns
    -------
    values, probabilities : ndarray
        The ``s + 1`` values LIF can take (``k / (p s) - 1`` for ``k = 0..s`` busy tiles on the
        most loaded node) and the probability of each; the probabilities sum to 1.

    Raises
    ------
    ShoalError
        If a parameter is out of range.
    """
    cdf = max_busy_cdf(nodes, tiles_per_node, busy)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    values = np.arange(tiles_per_node + 1) / (busy * tiles_per_node) - 1.0
    return values, pmf


@dataclass(frozen=True)
class MonteCarloEstimate:
    """A sample mean with its 95% confidence interval.

    Attributes
    ----------
    mean : float
        The sample mean.
    low, high : float
        The interval's ends: ``mean ∓ 1.96`` standard errors.
    trials : int
        The sample's size.
    """

    mean: float
    low: float
    high: float
    trials: int

    @property
    def half_width(self) -> float:
        """Half the width of the confidence interval: the estimate is ``mean ± half_width``."""
        return (self.high - self.low) / 2


MONTE_CARLO_DRAWS = 2e9  # tile draws: about a minute of one core; beyond, the estimate is refused


def expected_lif_monte_carlo(
    nodes: int,
    tiles_per_node: int,
    busy: float,
    trials: int = 20_000,
    seed: int = 0,
    model: str = "placement",
) -> MonteCarloEstimate:
    """Monte Carlo estimate of E[LIF].

    Parameters
    ----------
    nodes : int
        ``n``, at least 1.
    tiles_per_node : int
        ``s``, at least 1.
    busy : float
        ``p``, the fraction of busy tiles, in (0, 1].
    trials : int
        Independent draws of a whole placement, at least 2.
    seed : int
        Seed of the random generator: the same seed gives the same estimate.
    model : {"placement", "binomial"}
        ``"placement"``: the real Birdshot placement, ``round(p n s)`` busy tiles dealt at
        random, exactly ``s`` per node; LIF against the measured mean. ``"binomial"``: the
        paper's model, busy tiles per node ~ B(s, p) independently; LIF against ``p s``.

    Returns
    -------
    MonteCarloEstimate
        The sample mean of LIF over the trials with its 95% confidence interval.

    Raises
    ------
    ShoalError
        If a parameter is out of range, the model is unknown, no tile would be busy, or
        ``trials x nodes x tiles_per_node`` exceeds ``MONTE_CARLO_DRAWS``.
    """
    _check_model(nodes, tiles_per_node, busy)
    _check_monte_carlo(trials, seed, model)
    if reason := monte_carlo_refusal(nodes, tiles_per_node, busy, trials, model):
        raise ShoalError(reason)
    rng = np.random.default_rng(seed)
    n, s = int(nodes), int(tiles_per_node)
    if model == "binomial":
        peak = rng.binomial(s, busy, size=(trials, n)).max(axis=1)
        samples = peak / (busy * s) - 1.0
    else:
        total_busy = int(round(busy * n * s))
        flags = np.zeros(n * s, dtype=np.int8)
        flags[:total_busy] = 1
        samples = np.empty(trials)
        chunk = max(1, 20_000_000 // (n * s))
        for start in range(0, trials, chunk):
            m = min(chunk, trials - start)
            deal = rng.permuted(np.broadcast_to(flags, (m, n * s)), axis=1)
            per_node = deal.reshape(m, n, s).sum(axis=2, dtype=np.int64)
            samples[start : start + m] = per_node.max(axis=1) / (total_busy / n) - 1.0
    mean = float(samples.mean())
    half = 1.96 * float(samples.std(ddof=1)) / np.sqrt(trials)
    return MonteCarloEstimate(mean, float(mean - half), float(mean + half), int(trials))


def _check_monte_carlo(trials: int, seed: int, model: str) -> None:
    if trials < 2:
        raise ShoalError(f"Monte Carlo needs at least 2 trials, got {trials}")
    if seed < 0:
        raise ShoalError(f"the seed must be >= 0, got {seed}")
    if model not in ("placement", "binomial"):
        raise ShoalError(f"unknown Monte Carlo model {model!r}; known: placement, binomial")


def monte_carlo_refusal(nodes: int, tiles_per_node: int, busy: float, trials: int, model: str = "placement") -> str:
    """Why :func:`expected_lif_monte_carlo` would not run on valid parameters.

    Parameters
    ----------
    nodes, tiles_per_node : int
        ``n`` and ``s``.
    busy : float
        ``p``, the fraction of busy tiles.
    trials : int
        Draws of a whole placement.
    model : {"placement", "binomial"}
        The Monte Carlo's model.

    Returns
    -------
    str
        The reason, or "" if it would run: more than ``MONTE_CARLO_DRAWS`` tile draws, or (the
        placement model) no tile busy at all.
    """
    draws = float(trials) * float(nodes) * float(tiles_per_node)
    if draws > MONTE_CARLO_DRAWS:
        return (f"Monte Carlo of {trials} trials x {nodes} nodes x {tiles_per_node} tiles is {draws:.2g} tile draws, "
                f"above the {MONTE_CARLO_DRAWS:.0e} this bounds itself to: lower the trials")
    if model == "placement" and round(busy * nodes * tiles_per_node) == 0:
        return f"busy fraction {busy} leaves no busy tile among {nodes * tiles_per_node}"
    return ""


def tiles_per_node_for(target_lif: float, nodes: int, busy_fraction: float, limit: int = MAX_TILES_PER_NODE) -> int:
    """Smallest tiles per node whose exact E[LIF] is at most ``target_lif`` (§5.3).

    E[LIF] falls with ``s`` (up to small lattice wiggles), so the answer is found by doubling
    and then bisection on the exact model.

    Parameters
    ----------
    target_lif : float
        The E[LIF] to reach, positive (0.05 for 5% above the mean).
    nodes : int
        ``n``, at least 1.
    busy_fraction : float
        ``p``, the probability that a tile is busy, in (0, 1].
    limit : int
        Largest tiles per node tried.

    Raises
    ------
    ShoalError
        If a parameter is out of range or no tiles per node up to ``limit`` reaches the target.
    """
    _check_target(target_lif)
    _check_model(nodes, 1, busy_fraction)
    if expected_lif_exact(nodes, 1, busy_fraction) <= target_lif:
        return 1
    hi = 2
    while expected_lif_exact(nodes, hi, busy_fraction) > target_lif:
        hi *= 2
        if hi > limit:
            raise ShoalError(f"no tiles-per-node up to {limit} reaches E[LIF] <= {target_lif}")
    lo = hi // 2  # lo fails, hi meets the target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if expected_lif_exact(nodes, mid, busy_fraction) <= target_lif:
            hi = mid
        else:
            lo = mid
    return hi


def _check_target(target_lif: float) -> None:
    if not (np.isfinite(target_lif) and target_lif > 0):
        raise ShoalError(f"target LIF must be a positive number, got {target_lif}")


def describe_expected_lif(nodes: int, tiles_per_node: int, busy: float, trials: int = 20_000, seed: int = 0,
                          target: float | None = None) -> list[str]:
    """What ``shoal lif`` prints: E[LIF] by Birdshot's approximation, exactly, and by Monte
    Carlo of the real placement (skipped, saying why, when it would draw more than
    ``MONTE_CARLO_DRAWS`` tiles or no tile is busy), and with ``target`` the tiles per node
    that reach it.

    Parameters
    ----------
    nodes, tiles_per_node : int
        ``n`` (1 to ``MAX_NODES``) and ``s`` (1 to ``MAX_TILES_PER_NODE``).
    busy : float
        ``p``, the probability that a tile is busy, in (0, 1].
    trials : int
        Monte Carlo draws of a whole placement, at least 2.
    seed : int
        The Monte Carlo's seed, at least 0.
    target : float, optional
        An E[LIF] to reach, positive.

    Returns
    -------
    list of str
        The lines, computed whole before any is printed.

    Raises
    ------
    ShoalError
        If a parameter is out of range, or no tiles per node up to ``MAX_TILES_PER_NODE``
        reaches ``target``.
    """
    _check_model(nodes, tiles_per_node, busy)
    _check_monte_carlo(trials, seed, "placement")
    if target is not None:
        _check_target(target)
    lines = [f"n = {nodes} nodes, s = {tiles_per_node} tiles per node, p = {busy} busy",
             f"E[LIF] approximation (Birdshot Eq. 2): {expected_lif_approx(nodes, tiles_per_node, busy):.4f}",
             f"E[LIF] exact (binomial model):         {expected_lif_exact(nodes, tiles_per_node, busy):.4f}"]
    if reason := monte_carlo_refusal(nodes, tiles_per_node, busy, trials):
        lines.append(f"E[LIF] Monte Carlo: skipped ({reason})")
    else:
        mc = expected_lif_monte_carlo(nodes, tiles_per_node, busy, trials=trials, seed=seed)
        lines.append(f"E[LIF] Monte Carlo (real placement):   {mc.mean:.4f}  (95% CI {mc.low:.4f} .. {mc.high:.4f}, "
                     f"{mc.trials} trials)")
    if target is not None:
        need = tiles_per_node_for(target, nodes, busy)
        lines.append(f"tiles per node for E[LIF] <= {target}: {need}")
    return lines
