//! Unit tests of recipe loading, resolution, lock checks and image input hashes.

use super::*;
use crate::mcp::transport::{ReplyMode, SessionMode};

/// A checkout with one recipe: two API generations, two runtimes, two suites.
fn fixture() -> (tempfile::TempDir, RecipeBook) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let w = |p: &str, c: &str| {
        std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
        std::fs::write(r.join(p), c).unwrap();
    };
    w(
        "images/common/Dockerfile.cpython",
        "FROM {{FETCH_BASE}} AS fetch\nFROM {{BASE}}\nRUN {{LAUNCHER}} x\n",
    );
    w("images/common/image-manifest.py", "print('{}')\n");
    w(
        "images/sdk/recipe.toml",
        r#"
family = "sdk"
description = "a test SDK"
default_runtime = "py-a"
[runtime.py-a]
kind = "cpython"
dockerfile = "../common/Dockerfile.cpython"
suite = "bookworm"
base_packages = ["python3"]
launcher = ["/opt/venv/bin/python"]
[runtime.py-b]
kind = "cpython"
dockerfile = "../common/Dockerfile.cpython"
suite = "trixie"
base_packages = ["python3"]
fetch_packages = ["git"]
launcher = ["/opt/venv/bin/python"]
[api.new]
argv = ["/srv/{suite}.py"]
env = { QUIET = "1" }
[api.new.sources]
weekly = "servers/new/weekly.py"
pulse = "servers/new/pulse.py"
[api.new.programs.seed-9]
suite = "pulse"
file = "servers/seeds/9.py"
[api.old]
argv = ["/srv/{suite}.py"]
[api.old.sources]
weekly = "servers/old/weekly.py"
[[version]]
version = "2.0"
api = "new"
runtimes = ["py-a", "py-b"]
"#,
    );
    w("images/sdk/servers/new/weekly.py", "# a comment\nimport sdk\n\nsdk.run()\n");
    w("images/sdk/servers/new/pulse.py", "import sdk\n");
    w("images/sdk/servers/old/weekly.py", "import old\n");
    w("images/sdk/servers/seeds/9.py", "# the source's own\nimport sdk\nsdk.tool()\nsdk.run()\n");
    w("lockfiles/sdk/2.0-py-a/requirements.txt", "sdk==2.0 --hash=sha256:00\n");
    w("lockfiles/sdk/2.0-py-b/requirements.txt", "sdk==2.0 --hash=sha256:11\n");
    w("lockfiles/sdk/2.0-py-a+era/requirements.txt", "sdk==2.0 --hash=sha256:22\n");
    w("lockfiles/sdk/2.0-py-a+era/exclude-newer", "2020-01-01T23:59:59Z\n");
    let book = RecipeBook::load(r).unwrap();
    (d, book)
}

fn want(suite: &str) -> ServerWant {
    ServerWant {
        family: "sdk".into(),
        version: Some("2.0".into()),
        suite: suite.into(),
        ..Default::default()
    }
}

#[test]
fn a_stale_lock_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("requirements.in"), "mcp==1.1.2\nUvicorn[standard]==0.54.0  # asgi\n").unwrap();
    std::fs::write(
        d.join("requirements.txt"),
        "# generated\nmcp==1.1.2 \\\n    --hash=sha256:aa\nuvicorn==0.54.0 \\\n    --hash=sha256:bb\n",
    )
    .unwrap();
    assert_eq!(check_lock(d), Ok(()));
    std::fs::write(d.join("requirements.in"), "mcp==1.1.3\n").unwrap();
    assert!(check_lock(d).unwrap_err().contains("mcp==1.1.3"));
    let js = tempfile::tempdir().unwrap();
    let j = js.path();
    std::fs::write(j.join("package.json"), r#"{"dependencies":{"a":"1.0.0"}}"#).unwrap();
    std::fs::write(j.join("package-lock.json"), r#"{"packages":{"":{"dependencies":{"a":"1.0.0"}}}}"#)
        .unwrap();
    assert_eq!(check_lock(j), Ok(()));
    std::fs::write(j.join("package.json"), r#"{"dependencies":{"a":"2.0.0"}}"#).unwrap();
    assert!(check_lock(j).unwrap_err().contains("2.0.0"));
}

#[test]
fn resolves_launch_sources_and_loc() {
    let (_d, book) = fixture();
    let plan = book.resolve(&want("weekly")).unwrap();
    assert_eq!(plan.api, "new");
    assert_eq!(plan.launch.argv, ["/opt/venv/bin/python", "/srv/weekly.py"]);
    assert!(plan.launch.env.contains(&("QUIET".into(), "1".into())));
    assert!(plan.launch.env.contains(&("BENCHLAB_SUITE".into(), "weekly".into())));
    let src = plan.source.as_ref().unwrap();
    assert_eq!((src.file.as_str(), src.loc), ("images/sdk/servers/new/weekly.py", 2));
    let names: Vec<&str> = plan.build.as_ref().unwrap().files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["lock/requirements.txt", "srv/pulse.py", "srv/weekly.py", "image-manifest.py"]);
    assert_eq!(plan.fetch_base, None);
    // The other suite shares the image.
    assert!(plan.same_image(&book.resolve(&want("pulse")).unwrap()));
    // A runtime with download-only packages gets its own fetch base.
    let b = book.resolve(&ServerWant { runtime: Some("py-b".into()), ..want("weekly") }).unwrap();
    assert_eq!(b.fetch_base, Some(BaseSource::bootstrap("trixie", &["python3", "git"])));
    assert_eq!(
        b.dockerfile("BASE", "FETCH").unwrap(),
        "FROM FETCH AS fetch\nFROM BASE\nRUN /opt/venv/bin/python x\n"
    );
}

#[test]
fn resolve_errors_name_the_field_at_fault() {
    let (_d, book) = fixture();
    let field = |w: ServerWant| book.resolve(&w).unwrap_err().field;
    assert_eq!(field(ServerWant { family: "nope".into(), ..want("weekly") }), WantField::Family);
    assert_eq!(field(ServerWant { version: Some("9".into()), ..want("weekly") }), WantField::Version);
    assert_eq!(field(ServerWant { runtime: Some("py-z".into()), ..want("weekly") }), WantField::Runtime);
    assert_eq!(field(ServerWant { api: Some("old".into()), ..want("weekly") }), WantField::Api);
}

#[test]
fn refuses_what_the_recipe_cannot_build() {
    let (_d, book) = fixture();
    let e = |w: ServerWant| book.resolve(&w).unwrap_err().to_string();
    assert!(
        e(ServerWant { version: Some("9".into()), ..want("weekly") }).contains("no recipe for version \"9\"")
    );
    assert!(e(ServerWant { family: "nope".into(), ..want("weekly") }).contains("unknown server family"));
    assert!(e(ServerWant { runtime: Some("py-z".into()), ..want("weekly") }).contains("no runtime \"py-z\""));
    assert!(e(ServerWant { api: Some("old".into()), ..want("pulse") }).contains("refused unless"));
    let ok = book
        .resolve(&ServerWant { api: Some("old".into()), expect_failure: true, ..want("weekly") })
        .unwrap();
    assert_eq!(ok.api, "old");
    assert!(e(ServerWant { api: Some("old".into()), expect_failure: true, ..want("pulse") })
        .contains("has no pulse suite"));
    assert_eq!(
        book.resolve(&ServerWant { family: NULL_FAMILY.into(), ..want("weekly") }).unwrap().build,
        None
    );
    // The scenario's environment reaches the null server as it reaches a recipe's.
    let env = [("BENCHLAB_NULL_FAULT".to_string(), "leak:4096".to_string())].into_iter().collect();
    let null = book.resolve(&ServerWant { family: NULL_FAMILY.into(), env, ..want("weekly") }).unwrap();
    assert!(
        null.launch.env.contains(&("BENCHLAB_NULL_FAULT".into(), "leak:4096".into())),
        "{:?}",
        null.launch.env
    );
}

#[test]
fn input_hash_tracks_inputs_but_not_the_ca_bundle() {
    let (_d, book) = fixture();
    let plan = book.resolve(&want("weekly")).unwrap();
    let h = plan.input_hash("sha256:base1", "sha256:base1");
    assert_eq!(h, plan.input_hash("sha256:base1", "sha256:base1"));
    assert_ne!(h, plan.input_hash("sha256:base2", "sha256:base1"));
    assert_ne!(h, plan.input_hash("sha256:base1", "sha256:base2"));
    let mut changed = plan.clone();
    changed.build.as_mut().unwrap().files[0].1.push(b'\n');
    assert_ne!(h, changed.input_hash("sha256:base1", "sha256:base1"));
    let a = plan.context_tar("b", "b", b"ca-one").unwrap();
    let b = plan.context_tar("b", "b", b"ca-two").unwrap();
    assert_ne!(a, b, "the CA bundle is in the context, not in the hash");
    assert!(plan.reference(&h).starts_with("benchlab/sdk:2.0-py-a-"));
}

#[test]
fn counts_lines_of_code_without_comments() {
    assert_eq!(count_loc("# c\n\nimport x\n  # d\nx()\n", "py"), 2);
    assert_eq!(count_loc("// c\nimport x;\n/* a\n b */\nconst y = 1; /* z */\n", "mjs"), 2);
    // Rust: `//` is a comment; `///` and `//!` are read by the SDK (schema descriptions) and count.
    assert_eq!(count_loc("//! m\n// c\n/// doc\nfn f() {}\n", "rs"), 3);
    assert_eq!(count_loc("/// doc\n", "mjs"), 0);
}

#[test]
fn a_sources_program_runs_alone_in_its_own_image_and_leaves_the_others_alone() {
    let (_d, book) = fixture();
    let suite = book.resolve(&want("pulse")).unwrap();
    let entry = &suite.build.as_ref().unwrap().recipe_entry;
    assert!(["program", "lock", "bytecode"].iter().all(|k| entry.get(k).is_none()), "{entry}");
    let program = ServerWant { program: Some("seed-9".into()), ..want("pulse") };
    let plan = book.resolve(&program).unwrap();
    assert!(!plan.same_image(&suite));
    assert_eq!(plan.launch.argv, ["/opt/venv/bin/python", "/srv/seed-9.py"]);
    assert!(plan.launch.env.contains(&("BENCHLAB_SUITE".into(), "pulse".into())));
    let src = plan.source.as_ref().unwrap();
    assert_eq!((src.file.as_str(), src.loc), ("images/sdk/servers/seeds/9.py", 3));
    let build = plan.build.as_ref().unwrap();
    let names: Vec<&str> = build.files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["lock/requirements.txt", "srv/seed-9.py", "image-manifest.py"]);
    assert_eq!(build.recipe_entry["program"], "seed-9");
    assert!(!build.dockerfile_template.contains("__pycache__"));

    // A labelled lock: its own folder, files and input.
    let era = book.resolve(&ServerWant { lock: Some("era".into()), ..program.clone() }).unwrap();
    let files = &era.build.as_ref().unwrap().files;
    assert!(files.iter().any(|(n, d)| n == "lock/exclude-newer" && d.starts_with(b"2020-01-01")));
    assert!(!era.same_image(&plan));
    assert_eq!(era.build.as_ref().unwrap().recipe_entry["lock"], "era");
    // A lock label works for the suite servers too.
    assert!(book.resolve(&ServerWant { lock: Some("era".into()), ..want("weekly") }).is_ok());

    // Without bytecode: the last Dockerfile step removes it and gives the packages to the
    // sandbox user, so the first start writes what it compiles.
    let nobc = book.resolve(&ServerWant { no_bytecode: true, ..program.clone() }).unwrap();
    let dockerfile = &nobc.build.as_ref().unwrap().dockerfile_template;
    let step = dockerfile.rsplit("RUN ").next().unwrap();
    assert!(step.contains("-name __pycache__") && step.contains("chown -R 65534:65534 /opt/venv"), "{step}");
    assert_eq!(nobc.build.as_ref().unwrap().recipe_entry["bytecode"], "none");
    assert!(!nobc.same_image(&plan));
    assert_eq!(suite.variant(), None);
    assert_eq!(plan.variant().as_deref(), Some("program seed-9"));
    let both = book.resolve(&ServerWant { lock: Some("era".into()), ..nobc_want(&program) }).unwrap();
    assert_eq!(both.variant().as_deref(), Some("program seed-9, lock era, bytecode none"));
}

fn nobc_want(w: &ServerWant) -> ServerWant {
    ServerWant { no_bytecode: true, ..w.clone() }
}

#[test]
fn programs_locks_and_bytecode_refuse_what_does_not_fit() {
    let (_d, book) = fixture();
    let err = |w: ServerWant| book.resolve(&w).unwrap_err();
    let program = ServerWant { program: Some("seed-9".into()), ..want("pulse") };
    let e = err(ServerWant { program: Some("seed-0".into()), ..want("pulse") });
    assert_eq!(e.field, WantField::Program);
    assert!(e.message.contains("no program \"seed-0\" (it has: seed-9)"), "{}", e.message);
    let e = err(ServerWant { suite: "weekly".into(), ..program.clone() });
    assert_eq!(e.field, WantField::Program);
    assert!(e.message.contains("set `suite = \"pulse\"`"), "{}", e.message);
    let e = err(ServerWant { transport: Transport::Sse, ..program.clone() });
    assert_eq!(e.field, WantField::Program);
    let e = err(ServerWant { lock: Some("nolabel".into()), ..program.clone() });
    assert_eq!(e.field, WantField::Lock);
    assert!(e.message.contains("2.0-py-a+nolabel") && e.message.contains("--lock nolabel"), "{}", e.message);
    let e = err(ServerWant { no_bytecode: true, ..want("pulse") });
    assert_eq!(e.field, WantField::Bytecode);
}

#[test]
fn workers_need_a_recipe_that_says_it_runs_them() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let http = ServerWant {
        family: "python-mcp".into(),
        version: Some("1.30.0".into()),
        suite: "weekly".into(),
        transport: crate::mcp::transport::Transport::StreamableHttp,
        workers: 2,
        ..Default::default()
    };
    let e = book.resolve(&http).unwrap_err();
    assert_eq!(e.field, WantField::Workers);
    assert!(e.message.contains("has no multi-worker launch in its recipe"), "{}", e.message);
    assert!(book.resolve(&ServerWant { workers: 1, ..http }).is_ok());
}

#[test]
fn a_cargo_lock_must_pin_the_manifests_exact_versions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let manifest = "[package]\nname = \"s\"\nversion = \"0.1.0\"\n[dependencies]\nrmcp = { version = \"=3.11.0\", features = [\"server\"] }\nsha2 = \"=0.10.9\"\ntokio = \"1\"\n";
    std::fs::write(d.join("Cargo.toml"), manifest).unwrap();
    assert_eq!(check_lock(d), Err("Cargo.lock is missing".into()));
    assert!(!is_locked(d));
    let lock = "version = 4\n[[package]]\nname = \"rmcp\"\nversion = \"3.11.0\"\nsource = \"registry+x\"\nchecksum = \"aa\"\n\n[[package]]\nname = \"sha2\"\nversion = \"0.10.9\"\n\n[[package]]\nname = \"s\"\nversion = \"0.1.0\"\n";
    std::fs::write(d.join("Cargo.lock"), lock).unwrap();
    assert_eq!(check_lock(d), Ok(()));
    assert!(is_locked(d));
    // A manifest moved to another release, its lock not regenerated: refused.
    std::fs::write(d.join("Cargo.toml"), manifest.replace("=3.11.0", "=3.10.0")).unwrap();
    let e = check_lock(d).unwrap_err();
    assert!(e.contains("rmcp =3.10.0"), "{e}");
    // A range release's lock input: the template with the SDK pinned to the release.
    let pinned = super::lock::pin_cargo_dependency(manifest, "rmcp", "0.17.0", &[]).unwrap();
    let doc: toml::Table = toml::from_str(&pinned).unwrap();
    assert_eq!(doc["dependencies"]["rmcp"]["version"].as_str(), Some("=0.17.0"));
    assert_eq!(doc["dependencies"]["rmcp"]["features"][0].as_str(), Some("server"));
    assert_eq!(doc["dependencies"]["tokio"].as_str(), Some("1"));
    assert!(super::lock::pin_cargo_dependency(manifest, "nope", "1.0.0", &[]).unwrap_err().contains("nope"));
    // Its companion crates pinned beside it, added where the template does not name them.
    let pinned =
        super::lock::pin_cargo_dependency(manifest, "rmcp", "1.2.0", &["rmcp-macros".into()]).unwrap();
    let doc: toml::Table = toml::from_str(&pinned).unwrap();
    assert_eq!(doc["dependencies"]["rmcp"]["version"].as_str(), Some("=1.2.0"));
    assert_eq!(doc["dependencies"]["rmcp-macros"].as_str(), Some("=1.2.0"));
}

#[test]
fn rmcp_builds_in_its_own_stage_and_refuses_json_replies_with_sessions() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let w = |suite: &str| ServerWant {
        family: "rmcp".into(),
        version: Some("3.11.0".into()),
        suite: suite.into(),
        ..Default::default()
    };
    let plan = book.resolve(&w("pulse")).unwrap();
    assert_eq!(plan.runtime_kind, RuntimeKind::Rust);
    // The static binary ships on the bare bookworm base; the toolchain is trixie's, in the
    // build stage only.
    assert_eq!(plan.base, base::BaseSource::bootstrap("bookworm", &[]));
    let fetch = plan.fetch_base.clone().unwrap();
    assert_eq!(fetch.suite(), Some("trixie"));
    assert_eq!(plan.launch.argv, vec!["/srv/pulse".to_string()]);
    let files: Vec<&str> = plan.build.as_ref().unwrap().files.iter().map(|(n, _)| n.as_str()).collect();
    for f in [
        "lock/Cargo.toml",
        "lock/Cargo.lock",
        "srv/serve.rs",
        "srv/pulse.rs",
        "srv/bench.rs",
        "image-manifest-cargo.sh",
    ] {
        assert!(files.contains(&f), "{f} not in {files:?}");
    }
    // The cell's source is its suite's own file; serve.rs is shared, not counted.
    let source = plan.source.clone().unwrap();
    assert_eq!(source.file, "images/rmcp/servers/suites/pulse.rs");
    assert!(source.loc > 30, "{}", source.loc);
    assert!(plan.lock_deviation().is_none());
    // JSON replies with sessions: rmcp answers SSE there, so the cell is refused at its entry.
    let http = |reply, session| ServerWant {
        transport: Transport::StreamableHttp,
        reply: Some(reply),
        session: Some(session),
        ..w("weekly")
    };
    let e = book.resolve(&http(ReplyMode::Json, SessionMode::Stateful)).unwrap_err();
    assert_eq!(e.field, WantField::Transport);
    assert!(e.message.contains("only in session mode stateless"), "{}", e.message);
    let ok = book.resolve(&http(ReplyMode::Json, SessionMode::Stateless)).unwrap();
    assert_eq!(ok.http.unwrap().path, "/mcp");
    assert!(book.resolve(&http(ReplyMode::Sse, SessionMode::Stateful)).is_ok());
    let sse = ServerWant { transport: Transport::Sse, ..w("weekly") };
    assert!(book.resolve(&sse).unwrap_err().message.contains("does not serve sse"));
    // Its declared HTTP variants per suite: the three modes it serves, no legacy SSE.
    let modes: Vec<_> = book
        .http_variants()
        .into_iter()
        .filter(|v| v.family == "rmcp" && v.version == "3.11.0" && v.suite == "weekly")
        .map(|v| (v.transport, v.reply, v.session, v.rest))
        .collect();
    let streamable = |r, s| (Transport::StreamableHttp, Some(r), Some(s), true);
    assert_eq!(
        modes,
        [
            streamable(ReplyMode::Sse, SessionMode::Stateful),
            streamable(ReplyMode::Sse, SessionMode::Stateless),
            streamable(ReplyMode::Json, SessionMode::Stateless),
        ]
    );
    // 0.17.0 could not be locked as of its day (yanked dependencies): its records say so.
    let old = book.resolve(&ServerWant { version: Some("0.17.0".into()), ..w("weekly") }).unwrap();
    let note = old.lock_deviation().unwrap();
    assert!(note.starts_with("lock of rmcp 0.17.0: resolved as of"), "{note}");
    assert!(!note.contains('\n'));
}

#[test]
fn pypy_locks_with_its_own_interpreter_and_records_its_lock_deviation() {
    let book = RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let jobs = book.lock_jobs("python-mcp", "2.3.0", Some("pypy-trixie"), None).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].locker, Locker::Uv);
    assert_eq!(jobs[0].interpreter, "pypy3");
    let cpython = book.lock_jobs("python-mcp", "2.3.0", Some("cpython-trixie"), None).unwrap();
    assert_eq!(cpython[0].interpreter, "python3");
    let want = ServerWant {
        family: "python-mcp".into(),
        version: Some("2.3.0".into()),
        runtime: Some("pypy-trixie".into()),
        suite: "weekly".into(),
        ..Default::default()
    };
    let plan = book.resolve(&want).unwrap();
    assert_eq!(plan.runtime_kind, RuntimeKind::Pypy);
    assert_eq!(plan.base.suite(), Some("trixie"));
    let files: Vec<&str> = plan.build.as_ref().unwrap().files.iter().map(|(n, _)| n.as_str()).collect();
    assert!(files.contains(&"image-manifest-pypy.py"), "{files:?}");
    // The PyPy lock holds older pydantic-core and cryptography than CPython's: records say so.
    let note = plan.lock_deviation().unwrap();
    assert!(note.contains("PyPyModule_FromDefAndSpec2"), "{note}");
    let cp = book.resolve(&ServerWant { runtime: Some("cpython-trixie".into()), ..want }).unwrap();
    assert!(cp.lock_deviation().is_none());
}
