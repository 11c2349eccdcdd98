from .cli import main
from .lifeline import watch_parent

# `python -m shoal` is how shoal starts its own child processes: they stop when their parent dies.
watch_parent()
raise SystemExit(main())
