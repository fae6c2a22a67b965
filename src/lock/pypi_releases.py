# Prints {version: first upload time} of the package named by argv[1], from the JSON API of
# pip's default index (pip names it; the lab does not). Run by `benchlab lock` in a container.
import json, ssl, sys, urllib.request
from pip._internal.models.index import PyPI
ctx = ssl.create_default_context(cafile="/ca.pem")
data = json.load(urllib.request.urlopen(PyPI.url + "pypi/" + sys.argv[1] + "/json", context=ctx))
out = {}
for version, files in data["releases"].items():
    times = sorted(f["upload_time_iso_8601"] for f in files)
    if times:
        out[version] = times[0]
print(json.dumps(out))
