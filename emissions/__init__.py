"""The emissions calculation service: a self-hosted JSON API for the GHG emissions of shipments."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("emissions-service")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
