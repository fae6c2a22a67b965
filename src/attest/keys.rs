//! Ed25519 key files for attestations: generating a pair (the private key as PKCS#8 PEM at mode
//! 0600, the public key as SubjectPublicKeyInfo PEM beside it as `<file>.pub`), reading either
//! back, refusing a private key that group or others can read, and the keyring a verifier trusts
//! (never a key from inside the run folder it checks). Signing is `dsse`'s.

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

/// The public keys a verifier trusts, each with its keyid and the file it came from. Read from a
/// file holding one or more `PUBLIC KEY` PEM blocks, or from a folder's `*.pub` files (not its
/// sub-folders). It is the trust root: a key found in the run folder being checked is refused,
/// since whoever can rewrite a run can replace a key kept beside it.
#[derive(Debug, Clone)]
pub struct Keyring {
    /// The file or folder named by the user.
    pub source: PathBuf,
    pub keys: Vec<TrustedKey>,
}

#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub keyid: String,
    pub key: VerifyingKey,
    pub file: PathBuf,
}

impl Keyring {
    /// Reads the keyring at `path` (a file or a folder) for checking the run in `run_dir`:
    /// refused when it lies inside `run_dir`, holds no key, or holds something that is not an
    /// Ed25519 public key.
    pub fn read(path: &Path, run_dir: &Path) -> Result<Keyring, AttestError> {
        let meta =
            std::fs::metadata(path).map_err(|source| AttestError::Read { path: path.into(), source })?;
        let files = match meta.is_dir() {
            false => vec![path.to_path_buf()],
            true => {
                let entries = std::fs::read_dir(path)
                    .map_err(|source| AttestError::Read { path: path.into(), source })?;
                let mut files: Vec<PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "pub"))
                    .collect();
                files.sort();
                files
            }
        };
        let mut keys = Vec::new();
        for file in files {
            refuse_inside_run(&file, run_dir)?;
            let named = file.file_stem().and_then(|n| n.to_str()).filter(|n| is_keyid(n));
            for key in read_public_keys(&file)? {
                let keyid = super::dsse::keyid(&key);
                if let Some(named) = named.filter(|n| *n != keyid) {
                    return Err(key_error(
                        &file,
                        format!("its name says keyid {named}, but it holds key {keyid}"),
                    ));
                }
                if !keys.iter().any(|k: &TrustedKey| k.keyid == keyid) {
                    keys.push(TrustedKey { keyid, key, file: file.clone() });
                }
            }
        }
        if keys.is_empty() {
            return Err(key_error(
                path,
                "the keyring holds no public key (a folder's keys are its *.pub files)",
            ));
        }
        Ok(Keyring { source: path.to_path_buf(), keys })
    }

    /// The keyids of its keys, in keyring order.
    pub fn keyids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.keyid.clone()).collect()
    }

    /// The verifying keys, in keyring order.
    pub fn verifying_keys(&self) -> Vec<VerifyingKey> {
        self.keys.iter().map(|k| k.key).collect()
    }
}

/// A file name that is a keyid (64 lowercase hex digits), as `results/keyring/` names its files.
fn is_keyid(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A key file inside the run folder being checked is never a trust root.
fn refuse_inside_run(file: &Path, run_dir: &Path) -> Result<(), AttestError> {
    let (Ok(file_c), Ok(run_c)) = (file.canonicalize(), run_dir.canonicalize()) else {
        // An unreadable path is reported when it is read.
        return Ok(());
    };
    if file_c.starts_with(&run_c) {
        return Err(AttestError::KeyInRun { path: file.into(), run: run_dir.into() });
    }
    Ok(())
}

/// Every `PUBLIC KEY` PEM block of a file, each an Ed25519 SubjectPublicKeyInfo.
fn read_public_keys(path: &Path) -> Result<Vec<VerifyingKey>, AttestError> {
    const END: &str = "-----END PUBLIC KEY-----";
    let text = read_text(path)?;
    let mut keys = Vec::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("-----BEGIN PUBLIC KEY-----") {
        let Some(end) = rest[start..].find(END) else {
            return Err(key_error(path, "a PUBLIC KEY PEM block has no END line"));
        };
        let block = &rest[start..start + end + END.len()];
        keys.push(VerifyingKey::from_public_key_pem(block).map_err(|e| {
            key_error(path, format!("not an Ed25519 SubjectPublicKeyInfo PEM public key: {e}"))
        })?);
        rest = &rest[start + end + END.len()..];
    }
    if keys.is_empty() {
        return Err(key_error(
            path,
            "no -----BEGIN PUBLIC KEY----- block (a keyring file holds PEM public keys)",
        ));
    }
    Ok(keys)
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
    fn a_keyring_reads_a_folder_or_a_file_of_blocks_but_never_from_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let ring = dir.path().join("ring");
        std::fs::create_dir(&ring).unwrap();
        let a = generate(&ring.join("a")).unwrap();
        let b = generate(&ring.join("b")).unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        // A folder: its *.pub files (the private keys beside them are not read).
        let k = Keyring::read(&ring, &run).unwrap();
        assert_eq!(k.keyids(), vec![a.keyid.clone(), b.keyid.clone()]);
        // A file of two blocks.
        let both = dir.path().join("both.pem");
        let text = std::fs::read_to_string(&a.public).unwrap() + &std::fs::read_to_string(&b.public).unwrap();
        std::fs::write(&both, text).unwrap();
        assert_eq!(Keyring::read(&both, &run).unwrap().keyids(), vec![a.keyid.clone(), b.keyid]);
        // A key inside the run folder is refused, whether named itself or through a path.
        std::fs::copy(&a.public, run.join("attestation.pub")).unwrap();
        let e = Keyring::read(&run.join("attestation.pub"), &run).unwrap_err();
        assert!(matches!(e, AttestError::KeyInRun { .. }), "{e}");
        assert!(e.to_string().contains("--keyring"), "{e}");
        let e = Keyring::read(&run.join("../run/attestation.pub"), &run).unwrap_err();
        assert!(matches!(e, AttestError::KeyInRun { .. }), "{e}");
        assert!(matches!(Keyring::read(&run, &run), Err(AttestError::KeyInRun { .. })));
        // A file named by a keyid must hold that key.
        let named = dir.path().join("named");
        std::fs::create_dir(&named).unwrap();
        std::fs::copy(&a.public, named.join(format!("{}.pub", k.keyids()[1]))).unwrap();
        let e = Keyring::read(&named, &run).unwrap_err();
        assert!(e.to_string().contains("its name says keyid"), "{e}");
        // Nothing that is a key: refused.
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(matches!(Keyring::read(&empty, &run), Err(AttestError::Key { .. })));
        assert!(matches!(Keyring::read(&ring.join("a"), &run), Err(AttestError::Key { .. })));
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
