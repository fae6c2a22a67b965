"""Prints what a PyPy image holds, for the lab's environment manifest: PyPy's own version with the
Python language version it implements ("7.3.19 (Python 3.11.11)"), and every distribution
installed in the environment that runs the server."""
import importlib.metadata
import json
import platform
import sys

packages = sorted(
    ({"name": d.metadata["Name"], "version": d.version} for d in importlib.metadata.distributions()),
    key=lambda p: (p["name"].lower(), p["version"]),
)
pypy = ".".join(str(n) for n in sys.pypy_version_info[:3])
version = f"{pypy} (Python {platform.python_version()})"
print(json.dumps({"runtime": {"name": "pypy", "version": version}, "packages": packages}))
