"""The edge: HTTP service, command line, Python client and the workshop page."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("layoutopt")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
