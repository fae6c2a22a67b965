"""Prints what a CPython image holds, for the lab's environment manifest: the runtime's version
and every distribution installed in the environment that runs the server."""
import importlib.metadata
import json
import platform

packages = sorted(
    ({"name": d.metadata["Name"], "version": d.version} for d in importlib.metadata.distributions()),
    key=lambda p: (p["name"].lower(), p["version"]),
)
print(json.dumps({"runtime": {"name": "cpython", "version": platform.python_version()}, "packages": packages}))
