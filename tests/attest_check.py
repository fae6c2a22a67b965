#!/usr/bin/env python3
"""tests/attest_check.py: an independent check of a benchlab run attestation, with other people's
code: securesystemslib (DSSE envelope, PAE, Ed25519 keys), pyca/cryptography and the in-toto
attestation framework's Statement v1 model. It owns no benchlab logic beyond the documented
format (src/attest/mod.rs): keyid = hex sha256 of the raw public key, subjects named
records.jsonl and scenario.toml hold the sha256 of those files.

Usage: attest_check.py ENVELOPE PUBLIC_KEY_PEM RUN_DIR
Prints one JSON object; exit 0 when everything holds, 1 when something does not (named).
"""

import base64
import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://benchlab.dev/attestation/run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


class Failed(Exception):
    pass


def check(envelope_path, public_path, run_dir):
    with open(public_path, "rb") as f:
        public = serialization.load_pem_public_key(f.read())
    if not isinstance(public, Ed25519PublicKey):
        raise Failed(f"{public_path} is not an Ed25519 public key")
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    keyid = hashlib.sha256(raw).hexdigest()
    key = SSlibKey.from_crypto(public, keyid=keyid, scheme="ed25519")

    with open(envelope_path, "rb") as f:
        envelope_json = json.load(f)
    envelope = Envelope.from_dict(json.loads(json.dumps(envelope_json)))
    if envelope.payload_type != PAYLOAD_TYPE:
        raise Failed(f"payloadType is {envelope.payload_type!r}")
    # securesystemslib computes the PAE and matches the signature's keyid to our keyid rule.
    try:
        envelope.verify([key], 1)
    except Exception as e:  # VerificationError and friends
        raise Failed(f"securesystemslib: the envelope does not verify with key {keyid}: {e}")
    # The same with pyca/cryptography alone, over a PAE built here from the DSSE spec.
    payload = base64.b64decode(envelope_json["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload)
    if pae != envelope.pae():
        raise Failed("securesystemslib's PAE differs from the spec's")
    sig = base64.b64decode(envelope_json["signatures"][0]["sig"])
    public.verify(sig, pae)

    statement_json = json.loads(payload)
    if statement_json.get("_type") != STATEMENT_TYPE:
        raise Failed(f"_type is {statement_json.get('_type')!r}")
    # The in-toto attestation framework's own model: strict parse (unknown fields refused) and
    # its validation of a v1 Statement (type, subjects with digests, predicate present).
    pb = json_format.Parse(payload, statement_pb2.Statement())
    statement = Statement.copy_from_pb(pb)
    statement.validate()
    if statement.pb.predicate_type != PREDICATE_TYPE:
        raise Failed(f"predicateType is {statement.pb.predicate_type!r}")

    subjects = {}
    for s in statement.pb.subject:
        subjects.setdefault(s.name, []).append(s.digest["sha256"])
    checked = {}
    for name in ("records.jsonl", "scenario.toml"):
        with open(os.path.join(run_dir, name), "rb") as f:
            now = hashlib.sha256(f.read()).hexdigest()
        if subjects.get(name) != [now]:
            raise Failed(f"{name}: sha256 {now} now, the statement says {subjects.get(name)}")
        checked[name] = now
    images = sorted(n for n in subjects if n.startswith("image:"))
    for name in subjects:
        if name not in checked and not name.startswith("image:"):
            raise Failed(f"unexpected subject {name!r}")
    predicate = statement_json["predicate"]
    with open(os.path.join(run_dir, "records.jsonl"), "rb") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if predicate["records"] != len(lines):
        raise Failed(f"predicate.records is {predicate['records']}, the file has {len(lines)}")
    return {
        "ok": True,
        "keyid": keyid,
        "files": checked,
        "images": len(images),
        "records": predicate["records"],
        "verdicts": predicate["verdicts"],
    }


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        result = check(*sys.argv[1:])
    except Failed as e:
        print(json.dumps({"ok": False, "error": str(e)}))
        return 1
    except Exception as e:  # a library refusing something: also a failure, named
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
