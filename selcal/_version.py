"""The version of selcal (one place: the package, the JSON and the report read it)."""

__version__ = "0.2.0"
