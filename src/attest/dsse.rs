//! DSSE v1 with Ed25519: the pre-authentication encoding (PAE), the envelope's JSON shape, the
//! keyid rule, signing a payload and finding a signature that verifies. It knows nothing of
//! runs, statements or key files (`attest` and `keys` do).

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::hash::sha256_hex;

/// The payload type of an in-toto Statement in a DSSE envelope.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// DSSE's pre-authentication encoding, the bytes a signature covers:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths as ASCII decimal byte counts.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let head = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len());
    let mut out = Vec::with_capacity(head.len() + payload.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// The key id benchlab writes and looks for: hex sha256 of the raw 32-byte Ed25519 public key.
pub fn keyid(key: &VerifyingKey) -> String {
    sha256_hex(key.as_bytes())
}

/// A DSSE envelope as stored: `payload` and each `sig` in standard base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope. DSSE makes `keyid` optional; benchlab always writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    #[serde(default)]
    pub keyid: String,
    pub sig: String,
}

/// Why an envelope could not be read or did not verify.
#[derive(Debug, thiserror::Error)]
pub enum DsseError {
    #[error("the envelope is not DSSE JSON ({{\"payloadType\", \"payload\", \"signatures\"}}): {0}")]
    Json(String),
    #[error("the envelope's {what} is not base64: {message}")]
    Base64 { what: &'static str, message: String },
    #[error(
        "no signature in the envelope verifies with key {keyid} ({signatures} signature(s), \
         {candidates} with that keyid or none): the payload or its signature changed, or another \
         key signed it"
    )]
    BadSignature { keyid: String, signatures: usize, candidates: usize },
    #[error(
        "the envelope is signed by key {signed_by}, which the keyring does not hold (it trusts {trusted}): \
         another key signed it; trust a key only after checking its keyid out of band"
    )]
    NotTrusted { signed_by: String, trusted: String },
}

impl Envelope {
    /// Signs `payload` of `payload_type` with `key`: one signature over its PAE.
    pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
        let sig: Signature = key.sign(&pae(payload_type, payload));
        Envelope {
            payload_type: payload_type.to_string(),
            payload: STANDARD.encode(payload),
            signatures: vec![EnvelopeSignature {
                keyid: keyid(&key.verifying_key()),
                sig: STANDARD.encode(sig.to_bytes()),
            }],
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Envelope, DsseError> {
        serde_json::from_slice(bytes).map_err(|e| DsseError::Json(e.to_string()))
    }

    /// The payload's bytes (DSSE allows standard or URL-safe base64).
    pub fn payload_bytes(&self) -> Result<Vec<u8>, DsseError> {
        decode("payload", &self.payload)
    }

    /// The verified payload: some signature whose keyid is `key`'s (or empty) verifies over the
    /// PAE of this envelope's payload type and payload. Returns the keyid that verified and the
    /// payload.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(String, Vec<u8>), DsseError> {
        self.verify_any(std::slice::from_ref(key))
    }

    /// The verified payload under any of the trusted `keys`: a signature naming a trusted key's
    /// keyid is checked with that key, one without a keyid with each key. Ed25519 is checked
    /// strictly (no weak keys, no malleable signatures). Signatures that name only keys outside
    /// `keys` give `NotTrusted`, naming both sides. Returns the keyid that verified and the
    /// payload.
    pub fn verify_any(&self, keys: &[VerifyingKey]) -> Result<(String, Vec<u8>), DsseError> {
        let payload = self.payload_bytes()?;
        let message = pae(&self.payload_type, &payload);
        let ids: Vec<String> = keys.iter().map(keyid).collect();
        let mut candidates = 0;
        for s in &self.signatures {
            for (key, id) in keys.iter().zip(&ids) {
                if !(s.keyid.is_empty() || &s.keyid == id) {
                    continue;
                }
                candidates += 1;
                let bytes = decode("sig", &s.sig)?;
                let Ok(sig) = Signature::from_slice(&bytes) else { continue };
                if key.verify_strict(&message, &sig).is_ok() {
                    return Ok((id.clone(), payload));
                }
            }
        }
        if candidates == 0 && !self.signatures.is_empty() {
            let signed_by: Vec<&str> = self.signatures.iter().map(|s| s.keyid.as_str()).collect();
            return Err(DsseError::NotTrusted { signed_by: signed_by.join(", "), trusted: ids.join(", ") });
        }
        Err(DsseError::BadSignature { keyid: ids.join(", "), signatures: self.signatures.len(), candidates })
    }
}

fn decode(what: &'static str, text: &str) -> Result<Vec<u8>, DsseError> {
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|e| DsseError::Base64 { what, message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn pae_matches_the_dsse_specs_example() {
        // DSSE protocol.md's test vector.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        // Lengths are byte counts, not characters.
        assert_eq!(pae("t", "é".as_bytes()), b"DSSEv1 1 t 2 \xc3\xa9".to_vec());
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn the_keyid_is_the_sha256_of_the_raw_public_key() {
        let k = key(7).verifying_key();
        assert_eq!(keyid(&k), sha256_hex(k.as_bytes()));
        assert_eq!(keyid(&k).len(), 64);
    }

    #[test]
    fn a_signed_envelope_verifies_and_round_trips_through_json() {
        let k = key(1);
        let env = Envelope::sign(PAYLOAD_TYPE, b"{\"a\":1}", &k);
        assert_eq!(env.signatures[0].keyid, keyid(&k.verifying_key()));
        let json = serde_json::to_vec(&env).unwrap();
        let back = Envelope::parse(&json).unwrap();
        assert_eq!(back, env);
        let (id, payload) = back.verify(&k.verifying_key()).unwrap();
        assert_eq!(payload, b"{\"a\":1}");
        assert_eq!(id, keyid(&k.verifying_key()));
    }

    #[test]
    fn a_flipped_payload_byte_fails() {
        let k = key(2);
        let mut env = Envelope::sign(PAYLOAD_TYPE, b"{\"records\":136}", &k);
        let mut payload = env.payload_bytes().unwrap();
        payload[3] ^= 0x01;
        env.payload = STANDARD.encode(&payload);
        assert!(matches!(env.verify(&k.verifying_key()), Err(DsseError::BadSignature { candidates: 1, .. })));
    }

    #[test]
    fn a_changed_payload_type_fails() {
        let k = key(2);
        let mut env = Envelope::sign(PAYLOAD_TYPE, b"x", &k);
        env.payload_type = "application/json".into();
        assert!(env.verify(&k.verifying_key()).is_err());
    }

    #[test]
    fn a_wrong_key_fails() {
        let env = Envelope::sign(PAYLOAD_TYPE, b"x", &key(3));
        let other = key(4).verifying_key();
        // Its keyid differs, so no signature is even tried, and both keyids are named...
        let e = env.verify(&other).unwrap_err();
        assert!(matches!(e, DsseError::NotTrusted { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&keyid(&key(3).verifying_key())) && text.contains(&keyid(&other)), "{text}");
        // ...and with the keyid removed the signature itself does not verify.
        let mut anonymous = env.clone();
        anonymous.signatures[0].keyid.clear();
        assert!(matches!(anonymous.verify(&other), Err(DsseError::BadSignature { candidates: 1, .. })));
        assert!(anonymous.verify(&key(3).verifying_key()).is_ok());
    }

    #[test]
    fn broken_base64_and_json_are_input_errors() {
        let mut env = Envelope::sign(PAYLOAD_TYPE, b"x", &key(5));
        env.payload = "not base64!".into();
        assert!(matches!(
            env.verify(&key(5).verifying_key()),
            Err(DsseError::Base64 { what: "payload", .. })
        ));
        assert!(matches!(Envelope::parse(b"{\"payload\":1}"), Err(DsseError::Json(_))));
    }
}
