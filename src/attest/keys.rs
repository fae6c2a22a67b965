//! Ed25519 key files for attestations: generating a pair (the private key as PKCS#8 PEM at mode
//! 0600, the public key as SubjectPublicKeyInfo PEM beside it as `<file>.pub`), reading either
//! back, and refusing a private key that group or others can read. Signing is `dsse`'s.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};

use super::AttestError;

/// A key pair just written.
#[derive(Debug, Clone)]
pub struct Generated {
    pub private: PathBuf,
    pub public: PathBuf,
    pub keyid: String,
}

/// Where the public half of the key at `private` is written: the same name with `.pub` added.
pub fn public_path(private: &Path) -> PathBuf {
    let mut name = private.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Generates a key pair from the kernel's random source and writes it: `path` (PKCS#8 PEM, mode
/// 0600, created new) and `path.pub` (SubjectPublicKeyInfo PEM). Neither file may exist yet.
pub fn generate(path: &Path) -> Result<Generated, AttestError> {
    let public = public_path(path);
    for p in [path, public.as_path()] {
        if p.exists() {
            return Err(AttestError::KeyExists { path: p.to_path_buf() });
        }
    }
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|source| AttestError::Write { path: "/dev/urandom".into(), source })?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    let private_pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| key_error(path, e))?;
    let public_pem =
        key.verifying_key().to_public_key_pem(LineEnding::LF).map_err(|e| key_error(&public, e))?;
    write_new(path, private_pem.as_bytes(), 0o600)?;
    write_new(&public, public_pem.as_bytes(), 0o644)?;
    Ok(Generated { private: path.to_path_buf(), public, keyid: super::dsse::keyid(&key.verifying_key()) })
}

/// Reads a private key: PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, as `generate` or
/// `openssl genpkey -algorithm ed25519` write it), refused when group or others may read it.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, AttestError> {
    let meta = std::fs::metadata(path).map_err(|source| AttestError::Read { path: path.into(), source })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(AttestError::KeyPermissions { path: path.into(), mode });
    }
    let text = read_text(path)?;
    SigningKey::from_pkcs8_pem(&text)
        .map_err(|e| key_error(path, format!("not an Ed25519 PKCS#8 PEM private key: {e}")))
}

/// Reads a public key: SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, AttestError> {
    let text = read_text(path)?;
    VerifyingKey::from_public_key_pem(&text)
        .map_err(|e| key_error(path, format!("not an Ed25519 SubjectPublicKeyInfo PEM public key: {e}")))
}

fn read_text(path: &Path) -> Result<String, AttestError> {
    std::fs::read_to_string(path).map_err(|source| AttestError::Read { path: path.into(), source })
}

fn key_error(path: &Path, e: impl std::fmt::Display) -> AttestError {
    AttestError::Key { path: path.into(), reason: e.to_string() }
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AttestError> {
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write().map_err(|source| AttestError::Write { path: path.into(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_pair_reads_back_and_matches() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("lab.key");
        let g = generate(&k).unwrap();
        assert_eq!(g.public, dir.path().join("lab.key.pub"));
        let mode = std::fs::metadata(&k).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let private = read_signing_key(&k).unwrap();
        let public = read_verifying_key(&g.public).unwrap();
        assert_eq!(private.verifying_key(), public);
        assert_eq!(g.keyid, super::super::dsse::keyid(&public));
        let text = std::fs::read_to_string(&k).unwrap();
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"), "{text}");
        let text = std::fs::read_to_string(&g.public).unwrap();
        assert!(text.starts_with("-----BEGIN PUBLIC KEY-----"), "{text}");
        // Never overwritten.
        assert!(matches!(generate(&k), Err(AttestError::KeyExists { .. })));
    }

    #[test]
    fn a_private_key_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("k");
        generate(&k).unwrap();
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_signing_key(&k).unwrap_err();
        assert!(matches!(e, AttestError::KeyPermissions { mode: 0o640, .. }));
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }

    #[test]
    fn a_public_key_is_not_a_private_key() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("k");
        let g = generate(&k).unwrap();
        assert!(matches!(read_verifying_key(&k), Err(AttestError::Key { .. })));
        std::fs::set_permissions(&g.public, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(read_signing_key(&g.public), Err(AttestError::Key { .. })));
    }
}
