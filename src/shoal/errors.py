"""The one exception type users see: a single line saying what is wrong and where."""


class ShoalError(Exception):
    """Bad input or an impossible request; the CLI prints it as one line and exits 2."""
