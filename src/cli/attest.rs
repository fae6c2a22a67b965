//! `benchlab attest` and `benchlab verify-attestation`: a run folder's signed in-toto attestation
//! made and written, or checked against the folder, and what was done printed (or JSON). The
//! format, signing and checks live in `attest`; this finds files, hashes its own executable,
//! prints and maps errors to exit codes.

use std::path::{Path, PathBuf};

use super::exit::{error_chain, Exit, BAD_INPUT, ENVIRONMENT, FAILED, OK};
use crate::attest::{self, keys, AttestError, Attester, Envelope, ErrorClass, Statement, ENVELOPE_FILE};
use crate::scenario::DEFAULT_LOCKFILES;

#[derive(Debug, clap::Args)]
pub struct AttestArgs {
    /// The run folder to attest (holding records.jsonl and scenario.toml).
    #[arg(required_unless_present = "generate_key")]
    run: Option<PathBuf>,
    /// The private key to sign with: Ed25519, PKCS#8 PEM, mode 0600 (written by --generate-key,
    /// or by `openssl genpkey -algorithm ed25519`).
    #[arg(long, value_name = "K", required_unless_present = "generate_key")]
    key: Option<PathBuf>,
    /// Where to write the DSSE envelope (default: <run>/attestation.dsse.json).
    #[arg(long, value_name = "F")]
    out: Option<PathBuf>,
    /// Only generate a key pair: K (private, PKCS#8 PEM, mode 0600) and K.pub (public,
    /// SubjectPublicKeyInfo PEM, for verify-attestation --pub). Never overwrites.
    #[arg(long, value_name = "K", conflicts_with_all = ["run", "key", "out"])]
    generate_key: Option<PathBuf>,
    /// The checkout whose lockfiles/ list the release ranges of the scenario's matrices.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// The append-only attestation log to add a line to (default: an ATTESTATIONS.log in the
    /// run's parent or grandparent folder, when one exists; created when named here).
    #[arg(long, value_name = "FILE", conflicts_with = "generate_key")]
    log: Option<PathBuf>,
    /// Print the envelope (or the generated key's paths and keyid) as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerifyAttestationArgs {
    /// The run folder the attestation is about.
    run: PathBuf,
    /// The trusted public keys: a file of Ed25519 SubjectPublicKeyInfo PEM blocks (the K.pub of
    /// `attest --generate-key K`) or a folder of *.pub files. Never a key inside the run folder:
    /// pin the lab's key by checking its keyid out of band. `--pub K.pub` is the same option.
    #[arg(long, visible_alias = "pub", value_name = "FILE|DIR")]
    keyring: Option<PathBuf>,
    /// The attestation log to check the envelope against (default: an ATTESTATIONS.log in the
    /// run's parent or grandparent folder, when one exists).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The DSSE envelope (default: <run>/attestation.dsse.json).
    #[arg(long, value_name = "F")]
    envelope: Option<PathBuf>,
    /// The checkout whose lockfiles/ list the release ranges of the scenario's matrices.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Print the result as JSON: {"verified": true, "keyid", "checked", "statement"} or
    /// {"verified": false, "error", "class"}.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: AttestArgs) -> Result<i32, Exit> {
    if let Some(k) = &args.generate_key {
        return generate(k, args.json);
    }
    let (Some(run), Some(key)) = (args.run, args.key) else {
        return Err(Exit::input("attest needs a run folder and --key (or only --generate-key K)"));
    };
    let run = run_dir(&run);
    let signing = keys::read_signing_key(&key).map_err(exit)?;
    let lockfiles = args.root.join(DEFAULT_LOCKFILES);
    let (envelope, statement) = attest::attest(&run, &signing, &lockfiles, &attester()?).map_err(exit)?;
    let out = args.out.unwrap_or_else(|| run.join(ENVELOPE_FILE));
    let mut text = serde_json::to_string_pretty(&envelope).expect("envelopes serialise");
    text.push('\n');
    std::fs::write(&out, &text).map_err(|e| Exit::environment(format!("write {}: {e}", out.display())))?;
    let log = args.log.or_else(|| attest::log::find(&run));
    if let Some(log) = &log {
        let keyid = envelope.signatures.first().map_or("", |s| s.keyid.as_str());
        let digest = crate::hash::sha256_hex(text.as_bytes());
        attest::log::append(log, &run, &digest, keyid, &statement.predicate.made_at).map_err(exit)?;
    }
    if args.json {
        print!("{text}");
    } else {
        print_attested(&out, &envelope, &statement);
        if let Some(log) = &log {
            println!("logged in {}", log.display());
        }
    }
    Ok(OK)
}

/// Without a keyring: refused, saying how to pin the lab's key.
const NO_KEYRING: &str = "verify-attestation trusts no key found in the run folder (whoever can \
rewrite a run can replace the key beside it): name the lab's public key with --keyring FILE|DIR \
(or --pub K.pub), kept outside the run. Pin it first: its keyid (sha256 of the raw key) must equal \
the one the lab publishes, e.g. `openssl pkey -pubin -in K.pub -outform DER | tail -c 32 | sha256sum`";

/// Verifies the envelope with the keyring, then checks it against the attestation log.
fn verify_with_log(
    run: &Path,
    path: &Path,
    keyring: &Path,
    log: Option<PathBuf>,
    lockfiles: &Path,
) -> Result<attest::Verified, AttestError> {
    let keyring = keys::Keyring::read(keyring, run)?;
    let bytes = std::fs::read(path).map_err(|source| AttestError::Read { path: path.into(), source })?;
    let mut v = attest::verify(run, &Envelope::parse(&bytes)?, &keyring.verifying_keys(), lockfiles)?;
    let file = keyring.keys.iter().find(|k| k.keyid == v.keyid).map(|k| k.file.display().to_string());
    v.checked[0].push_str(&format!(" (from the keyring, {})", file.unwrap_or_default()));
    match log.or_else(|| attest::log::find(run)) {
        Some(log) => {
            let line = attest::log::check(&log, run, &crate::hash::sha256_hex(&bytes), &v.keyid)?;
            v.checked.push(line);
        }
        None => v.checked.push(format!(
            "log: no {} in the run's parent or grandparent folder (not checked)",
            attest::log::LOG_FILE
        )),
    }
    Ok(v)
}

pub(super) fn verify(args: VerifyAttestationArgs) -> Result<i32, Exit> {
    let run = run_dir(&args.run);
    let path = args.envelope.unwrap_or_else(|| run.join(ENVELOPE_FILE));
    let lockfiles = args.root.join(DEFAULT_LOCKFILES);
    let Some(keyring) = &args.keyring else {
        return Err(Exit::input(NO_KEYRING));
    };
    let result = verify_with_log(&run, &path, keyring, args.log, &lockfiles);
    match (result, args.json) {
        (Ok(v), true) => {
            let mut value = serde_json::to_value(&v).expect("results serialise");
            value["verified"] = true.into();
            println!("{}", serde_json::to_string_pretty(&value).expect("results serialise"));
            Ok(OK)
        }
        (Ok(v), false) => {
            println!("{}: the attestation {} holds", run.display(), path.display());
            for line in &v.checked {
                println!("  ok  {line}");
            }
            Ok(OK)
        }
        (Err(e), true) => {
            let class = match e.class() {
                ErrorClass::Input => "input",
                ErrorClass::Mismatch => "mismatch",
                ErrorClass::Environment => "environment",
            };
            let value = serde_json::json!({"verified": false, "error": error_chain(&e), "class": class});
            println!("{}", serde_json::to_string_pretty(&value).expect("results serialise"));
            Ok(exit(e).code)
        }
        (Err(e), false) => {
            let e = exit(e);
            let what = if e.code == FAILED { "does NOT hold" } else { "could not be checked" };
            Err(Exit::new(e.code, format!("the attestation {} {what}: {}", path.display(), e.message)))
        }
    }
}

fn generate(path: &Path, json: bool) -> Result<i32, Exit> {
    let g = keys::generate(path).map_err(exit)?;
    if json {
        let value = serde_json::json!({
            "private": g.private.display().to_string(),
            "public": g.public.display().to_string(),
            "keyid": g.keyid,
        });
        println!("{}", serde_json::to_string_pretty(&value).expect("JSON values serialise"));
    } else {
        println!("wrote the private key {} (PKCS#8 PEM, mode 0600: keep it secret)", g.private.display());
        println!("wrote the public key {} (for verify-attestation --pub)", g.public.display());
        println!("keyid {} (sha256 of the raw public key)", g.keyid);
    }
    Ok(OK)
}

fn print_attested(out: &Path, envelope: &Envelope, statement: &Statement) {
    let p = &statement.predicate;
    println!(
        "wrote {}: {} record(s) of run {} (scenario {}), signed by key {}",
        out.display(),
        p.records,
        p.run_ids.join(", "),
        p.scenario,
        envelope.signatures.first().map_or("-", |s| s.keyid.as_str())
    );
    println!("subjects:");
    for s in &statement.subject {
        println!("  {}  sha256:{}", s.name, s.sha256_hex());
    }
    match &p.verdicts {
        None => println!("verdicts: none (the scenario has no claims)"),
        Some(v) => {
            let counts: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
            println!("verdicts: {}", counts.join(", "));
        }
    }
    for w in &p.audit.warnings {
        println!("warning (attested): {w}");
    }
}

/// A run folder, or the folder of a records.jsonl given instead.
fn run_dir(run: &Path) -> PathBuf {
    match run.is_file() {
        true => run.parent().unwrap_or(Path::new(".")).to_path_buf(),
        false => run.to_path_buf(),
    }
}

/// This executable's sha256 and version.
fn attester() -> Result<Attester, Exit> {
    let exe = std::env::current_exe()
        .map_err(|e| Exit::environment(format!("cannot find my own executable: {e}")))?;
    let sha256 = crate::hash::sha256_file(&exe)
        .map_err(|e| Exit::environment(format!("read my own executable {}: {e}", exe.display())))?;
    Ok(Attester { sha256, version: env!("CARGO_PKG_VERSION").to_string() })
}

fn exit(e: AttestError) -> Exit {
    let code = match e.class() {
        ErrorClass::Input => BAD_INPUT,
        ErrorClass::Mismatch => FAILED,
        ErrorClass::Environment => ENVIRONMENT,
    };
    Exit::new(code, error_chain(&e))
}
