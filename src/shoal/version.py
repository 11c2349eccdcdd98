"""shoal's version, in a module of its own so that any floor may read it without importing the
package's API."""

__version__ = "0.1.0"
