"""Invasive compute balancing: a resource manager that moves cores, not data, between the ranks
of a run and between concurrently running simulations (the invasive paper, §5)."""
