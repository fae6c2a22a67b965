//! `benchlab source fetch` through the real binary, on a git repository, a folder and a tarball
//! the test makes (no network: the repository's URL is served by `--source-mirror`): the tree
//! hash it prints is recomputed here from the files (format 1 of the listing, written out
//! independently), a second fetch is a cache hit, and bad input (a commit the mirror lacks, a
//! wrong sha256, a path the commit lacks) is refused with exit 2 at the scenario's key, before
//! anything is stored; `plan` refuses a source without a Dockerfile at its `source`, and a
//! `family` beside a `source` at the family.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const URL: &str = "https://example.invalid/bench/servers";

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const FILES: &[(&str, &str)] = &[
    ("py/Dockerfile", "FROM python:3.11-slim\nCOPY main.py .\nCMD [\"python\", \"main.py\"]\n"),
    ("py/main.py", "print('server')\n"),
    ("node/index.js", "console.log(1)\n"),
];

/// The tree hash of `py/` as format 1 of the listing defines it: "benchlab-tree 1", then one
/// line per file in path order, `file 644 <sha256 of the bytes> <path under py/>`.
fn expected_py_hash() -> String {
    let mut listing = String::from("benchlab-tree 1\n");
    let mut files: Vec<_> = FILES.iter().filter_map(|(p, c)| p.strip_prefix("py/").map(|p| (p, c))).collect();
    files.sort();
    for (p, c) in files {
        listing.push_str(&format!("file 644 {} {p}\n", sha(c.as_bytes())));
    }
    sha(listing.as_bytes())
}

struct Lab {
    dir: tempfile::TempDir,
    commit: String,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        for (p, c) in FILES {
            std::fs::create_dir_all(repo.join(p).parent().unwrap()).unwrap();
            std::fs::write(repo.join(p), c).unwrap();
        }
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "servers"]);
        let commit = git(&repo, &["rev-parse", "HEAD"]);
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        Lab { dir, commit }
    }

    fn scenario(&self, source: &str) -> std::path::PathBuf {
        let text = format!(
            "name = \"byo\"\n\n[[server]]\nid = \"py\"\n\n\nsource = {source}\n\n[[workload]]\nkind = \"cold_start\"\nspawns = 1\n"
        );
        let path = self.dir.path().join("byo.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `benchlab <args> <scenario> --source-mirror URL=<repo>`, its work folder inside the test's.
    fn lab(&self, args: &[&str], scenario: &Path) -> Output {
        Command::new(BIN)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .arg(scenario)
            .arg("--source-mirror")
            .arg(format!("{URL}={}", self.dir.path().join("repo").display()))
            .env("TMPDIR", self.dir.path().join("tmp"))
            .output()
            .unwrap()
    }

    fn trees(&self) -> usize {
        std::fs::read_dir(self.dir.path().join("tmp/benchlab-work/sources/trees")).map_or(0, |r| r.count())
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_commit_through_a_mirror_a_folder_and_a_tarball_give_the_hash_of_their_files() {
    let lab = Lab::new();
    let short = &lab.commit[..10];
    let scenario = lab.scenario(&format!(r#"{{ git = "{URL}", commit = "{short}", path = "py" }}"#));
    let out = lab.lab(&["source", "fetch", "--format", "json"], &scenario);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v[0];
    assert_eq!(s["server"], "py");
    assert_eq!(s["source"]["origin"]["git"]["url"], URL, "the record names the URL, not the mirror");
    assert_eq!(s["source"]["origin"]["git"]["commit"], lab.commit.as_str(), "the full commit");
    assert_eq!(s["tree_sha256"], expected_py_hash().as_str());
    assert_eq!((s["files"].as_u64(), s["cached"].as_bool()), (Some(2), Some(false)));
    let tree = Path::new(s["tree"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(tree.join("main.py")).unwrap(), "print('server')\n");
    let listing = std::fs::read(tree.with_extension("listing")).unwrap();
    assert_eq!(sha(&listing), expected_py_hash(), "the listing beside the tree is what the hash is of");

    let again = lab.lab(&["source", "fetch", "-f", "json"], &scenario);
    let v: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v[0]["cached"], true, "{}", stderr(&again));

    // The same files as a folder, and as a tarball with its sha256.
    let scenario = lab.scenario(r#"{ dir = "repo", path = "py" }"#);
    let out = lab.lab(&["source", "fetch", "-f", "json"], &scenario);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["tree_sha256"], expected_py_hash().as_str(), "{}", stderr(&out));
    let status = Command::new("tar")
        .current_dir(lab.dir.path())
        .args(["--exclude=.git", "-czf", "servers.tgz", "repo"])
        .status()
        .unwrap();
    assert!(status.success());
    let tgz = sha(&std::fs::read(lab.dir.path().join("servers.tgz")).unwrap());
    let scenario =
        lab.scenario(&format!(r#"{{ tarball = "servers.tgz", sha256 = "{tgz}", path = "repo/py" }}"#));
    let out = lab.lab(&["source", "fetch"], &scenario);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&expected_py_hash()[..16]) && table.contains("repo/py"), "{table}");
}

#[test]
fn bad_sources_are_refused_at_their_key_with_exit_2_and_nothing_stored() {
    let lab = Lab::new();
    let cases = [
        (
            format!(r#"{{ git = "{URL}", commit = "{}", path = "py" }}"#, "e".repeat(40)),
            "7:",
            "is not in the mirror",
        ),
        (
            format!(r#"{{ git = "{URL}", commit = "{}", path = "go" }}"#, lab.commit),
            "7:",
            "no \"go\" at commit",
        ),
        (format!(r#"{{ tarball = "none.tgz", sha256 = "{}" }}"#, "0".repeat(64)), "7:", "cannot read"),
    ];
    for (source, at, says) in &cases {
        let scenario = lab.scenario(source);
        let out = lab.lab(&["source", "fetch"], &scenario);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{source}: {err}");
        assert!(err.contains(&format!("byo.toml:{at}")) && err.contains(says), "{source}: {err}");
    }
    // A wrong sha256 names the right one, at the sha256 key.
    std::fs::write(lab.dir.path().join("t.tar"), b"").unwrap();
    let scenario = lab.scenario(&format!(r#"{{ tarball = "t.tar", sha256 = "{}" }}"#, "1".repeat(64)));
    let err = stderr(&lab.lab(&["source", "fetch"], &scenario));
    assert!(err.contains("byo.toml:7:40") && err.contains(&sha(b"")), "{err}");
    assert_eq!(lab.trees(), 0, "no tree was stored");

    // A source is built by its own Dockerfile: a tree without one is refused by plan at its
    // `source`, before anything is built.
    let scenario = lab.scenario(&format!(r#"{{ git = "{URL}", commit = "{}" }}"#, lab.commit));
    let out = lab.lab(&["plan"], &scenario);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("byo.toml:7:10") && err.contains("the source has no Dockerfile at the top"),
        "{err}"
    );
    // A family beside a source is refused at the family.
    let text = std::fs::read_to_string(&scenario).unwrap().replacen(
        "\n\n\nsource",
        "\nfamily = \"python-mcp\"\n\nsource",
        1,
    );
    std::fs::write(&scenario, text).unwrap();
    let out = lab.lab(&["plan"], &scenario);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("byo.toml:5:10") && stderr(&out).contains("leave out `family`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_compose_file_imports_to_a_scenario_whose_sources_fetch_and_an_existing_file_is_kept() {
    let lab = Lab::new();
    let compose = "services:\n  py:\n    build: ./py\n    environment:\n      - MODE=bench\n    deploy:\n      resources:\n        limits:\n          cpus: \"1.0\"\n          memory: 1G\n  node:\n    build: ./node\n";
    std::fs::write(lab.dir.path().join("repo/docker-compose.yml"), compose).unwrap();
    let out_file = lab.dir.path().join("imported.toml");
    let import = |extra: &[&str]| {
        Command::new(BIN)
            .args(["import", "compose"])
            .arg(lab.dir.path().join("repo/docker-compose.yml"))
            .args(["--git", URL, "--commit", &lab.commit, "-o"])
            .arg(&out_file)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = import(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&out_file).unwrap();
    assert!(text.contains("cpus = 1.0") && text.contains("memory = \"1GiB\""), "{text}");
    assert!(text.contains("env = { MODE = \"bench\" }"), "{text}");

    let fetched = lab.lab(&["source", "fetch", "-f", "json"], &out_file);
    assert_eq!(fetched.status.code(), Some(0), "{}", stderr(&fetched));
    let v: Value = serde_json::from_slice(&fetched.stdout).unwrap();
    let servers: Vec<&str> = v.as_array().unwrap().iter().map(|s| s["server"].as_str().unwrap()).collect();
    assert_eq!(servers, ["node", "py"]);
    assert_eq!(
        v[1]["tree_sha256"],
        expected_py_hash().as_str(),
        "the compose's py/ is the tree hashed above"
    );

    let again = import(&[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("never overwrites"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), text, "the first skeleton is kept");
}

#[test]
fn each_dockerfile_from_is_shown_with_the_base_rule_that_maps_it_and_a_bad_rule_is_refused() {
    let lab = Lab::new();
    let scenario = lab.scenario(&format!(r#"{{ git = "{URL}", commit = "{}", path = "py" }}"#, lab.commit));
    let mut text = std::fs::read_to_string(&scenario).unwrap();
    text.push_str("\n[source.base]\n\"python:3.11-slim\" = { suite = \"bookworm\", packages = [\"python3\", \"python3-pip\"] }\n");
    std::fs::write(&scenario, &text).unwrap();
    let out = lab.lab(&["source", "fetch", "-f", "json"], &scenario);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let from = &v[0]["from"][0];
    assert_eq!((from["line"].as_u64(), from["image"].as_str()), (Some(1), Some("python:3.11-slim")), "{v}");
    assert_eq!(from["here"]["suite"], "bookworm");
    assert_eq!(from["here"]["packages"][1], "python3-pip");

    // Without the rule the table says so, and a note says what to write.
    std::fs::write(&scenario, text.replace("\"python:3.11-slim\" = ", "\"python:3.12-slim\" = ")).unwrap();
    let out = lab.lab(&["source", "fetch"], &scenario);
    assert!(String::from_utf8_lossy(&out.stdout).contains("python:3.11-slim → no rule"));
    assert!(stderr(&out).contains("no [source.base] rule for \"python:3.11-slim\""), "{}", stderr(&out));

    // A rule that is both a base and unavailable is refused at its key.
    std::fs::write(&scenario, text.replace("packages = [", "unavailable = \"x\", packages = [")).unwrap();
    let out = lab.lab(&["source", "fetch"], &scenario);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("byo.toml:14:1: [source.base] \"python:3.11-slim\": a rule is"),
        "{}",
        stderr(&out)
    );
}
