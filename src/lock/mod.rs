//! `benchlab lock`: regenerates lock folders with the real lockers (uv for Python sets, npm for
//! Node and Bun, cargo for Rust servers) run inside a container of each target's own base, so the Python version and the
//! platform tags are the image's own. A release range is listed from the package index first and
//! each release locked as of the end of the day it was published. It runs containers through the
//! container backend's engine; it never builds an image.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::backend::containers::{images, ContainerSpec, Engine, Mount, Network, OutputLine, LABEL_RUN};
use crate::backend::{BackendConfig, EngineError, PrepareEvent};
use crate::recipe::{Locker, RecipeBook};
use crate::spec::Sandbox;

/// Prints `{version: first upload time}` of the package named by argv[1], from the JSON API of
/// pip's default index (pip names it; the lab does not).
const PYPI_RELEASES: &str = include_str!("pypi_releases.py");

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The request cannot be met as asked (a malformed range, an unknown family): exit 2.
    #[error("plan the lock: {0}")]
    Input(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// Prints the cargo index entry of `{package}`, one JSON line per release (`vers`, `pubtime`,
/// `yanked`). cargo names its index, the lab does not: a throwaway manifest on the package makes
/// cargo fetch the entry, and its cached copy (NUL-separated records) holds the lines.
const CARGO_RELEASES: &str = r#"set -e
mkdir -p /tmp/lister && cd /tmp/lister
printf '[package]\nname = "lister"\nversion = "0.0.0"\n[lib]\npath = "lib.rs"\n[dependencies]\n{package} = "*"\n' > Cargo.toml
CARGO_HTTP_CAINFO=/ca.pem cargo generate-lockfile --quiet
find "${CARGO_HOME:-$HOME/.cargo}/registry/index" -path '*/.cache/*' -type f -name '{package}' |
  while read -r f; do tr '\000' '\n' < "$f" | grep '^{'; done
"#;

/// The uv release `benchlab lock` installs in the target base to lock Python sets.
pub const UV_VERSION: &str = "0.13.9";

/// Regenerates lock folders with a real locker run inside a container of each target's base
/// (so the Python version and platform tags are the image's own). The container has the default
/// network (it downloads); the CA bundle is mounted read-only for it.
///
/// `versions` is one version or a release range (`1.1.2..1.x`): for a range the package index is
/// listed first (in a container of the same base), the list is kept in
/// `lockfiles/<family>/releases.toml`, and every release of the range (as `pick` says) that has no
/// fresh lock yet gets its lock input from the recipe's template and is locked — one container
/// per runtime for all of them.
#[allow(clippy::too_many_arguments)]
pub async fn lock<E: Engine>(
    engine: &E,
    recipes: &RecipeBook,
    family: &str,
    versions: &str,
    pick: crate::recipe::releases::Pick,
    runtime: Option<&str>,
    label: Option<&str>,
    config: &BackendConfig,
    emit: &mut (dyn FnMut(PrepareEvent) + Send),
) -> Result<Vec<PathBuf>, LockError> {
    let plan_err = |m: String| LockError::Input(m);
    let is_range = versions.contains("..");
    if is_range && label.is_some() {
        return Err(plan_err("a labelled lock (`--lock`) is of one version, not of a range".into()));
    }
    let jobs = match is_range {
        true => range_jobs(engine, recipes, family, versions, pick, runtime, config, emit).await?,
        false => recipes.lock_jobs(family, versions, runtime, label).map_err(plan_err)?,
    };
    // One container per runtime locks every folder of that runtime.
    let mut by_runtime: Vec<(String, Vec<crate::recipe::LockJob>)> = Vec::new();
    for job in jobs {
        match by_runtime.iter_mut().find(|(r, _)| *r == job.runtime) {
            Some((_, list)) => list.push(job),
            None => by_runtime.push((job.runtime.clone(), vec![job])),
        }
    }
    let mut done = Vec::new();
    for (runtime, jobs) in by_runtime {
        let first = &jobs[0];
        let base = images::ensure_base(engine, &first.base, &config.work_dir, emit).await?;
        let family_dir =
            std::fs::canonicalize(recipes.lockfiles_dir.join(family)).map_err(|e| LockError::Io {
                what: format!("lock folder {}", recipes.lockfiles_dir.join(family).display()),
                source: e,
            })?;
        let mut script = String::from("set -e; ");
        if first.locker == Locker::Uv {
            script.push_str(&format!(
                "{py} -m venv /tmp/locker; \
                 PIP_CERT=/ca.pem /tmp/locker/bin/pip install --quiet --disable-pip-version-check uv=={UV_VERSION}; ",
                py = first.interpreter
            ));
        }
        for job in &jobs {
            let folder = job.dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let flag = label.map(|l| format!(" --lock {l}")).unwrap_or_default();
            let command =
                format!("benchlab lock {} {} --runtime {}{flag}", job.family, job.version, job.runtime);
            script.push_str(&format!(
                "echo 'locking {folder}'; cd /lock/{folder}; \
                 before=''; [ -f {f} ] && before=$(cat {f}); ",
                f = crate::recipe::releases::EXCLUDE_NEWER_FILE
            ));
            script.push_str(&match first.locker {
                Locker::Uv => format!(
                    "SSL_CERT_FILE=/ca.pem /tmp/locker/bin/uv pip compile --quiet requirements.in --generate-hashes \
                     ${{before:+--exclude-newer $before}} \
                     --python /usr/bin/{py} --custom-compile-command '{command}' -o requirements.txt; ",
                    py = job.interpreter
                ),
                // cargo's resolver as of the day (`--publish-time`, unstable in cargo 1.96: the
                // bootstrap switch lets Debian's stable cargo take it), with checksums. cargo
                // applies today's yanks to that day, so a release whose dependencies were since
                // yanked cannot be resolved as of its day: it is then resolved as of the first
                // later day that resolves (found by halving the days between, to the day), or as
                // of now when none does, and the folder's `lock-deviation` says so (and why);
                // records carry it.
                Locker::Cargo => format!(
                    "rm -f {dev}; export CARGO_HTTP_CAINFO=/ca.pem RUSTC_BOOTSTRAP=1; \
                     asof() {{ cargo generate-lockfile --quiet -Zunstable-options --publish-time \"$1\"; }}; \
                     if [ -z \"$before\" ]; then cargo generate-lockfile --quiet; \
                     elif ! asof \"$before\" 2>/tmp/why; then \
                       cat /tmp/why >&2; lo=$(date -u -d \"$before\" +%s); hi=$(date -u +%s); at=''; \
                       while [ $((hi - lo)) -gt 86400 ]; do \
                         mid=$(( (lo + hi) / 2 )); t=$(date -u -d @$mid +%Y-%m-%dT23:59:59Z); \
                         if asof \"$t\" 2>/dev/null; then hi=$mid; at=$t; else lo=$mid; fi; \
                       done; \
                       if [ -n \"$at\" ]; then asof \"$at\"; how='the first day cargo could resolve it'; \
                       else cargo generate-lockfile --quiet; at=$(date -u +%Y-%m-%dT%H:%M:%SZ); how='now'; fi; \
                       echo \"locked as of $at ($how), not $before\" >&2; \
                       {{ echo \"resolved as of $at ($how), not $before: cargo could not resolve it as of that day with today's yanked releases left out:\"; \
                          grep -v -e '^ *$' -e 'location searched' /tmp/why | head -4; }} > {dev}; fi; ",
                    dev = crate::recipe::LOCK_DEVIATION_FILE
                ),
                Locker::Npm => "npm_config_cafile=/ca.pem npm install --package-lock-only --ignore-scripts --no-audit --no-fund --omit-lockfile-registry-resolved --loglevel=warn ${before:+--before $before}; ".to_string(),
            });
        }
        let started = Instant::now();
        emit(PrepareEvent::Locking {
            what: format!("{} folder(s) of {family} ({runtime}) with {}", jobs.len(), first.locker),
        });
        let mounts =
            vec![Mount::Bind { source: family_dir.clone(), target: "/lock".into(), read_only: false }];
        run_locker(
            engine,
            &base.image_id,
            script,
            mounts,
            config,
            &format!("lock {family} ({runtime})"),
            Output::Shown,
            emit,
        )
        .await?;
        emit(PrepareEvent::Ready {
            what: "lock",
            reference: format!("{} folder(s) of {family} ({runtime})", jobs.len()),
            cached: false,
            seconds: started.elapsed().as_secs_f64(),
        });
        done.extend(jobs.into_iter().map(|j| j.dir));
    }
    Ok(done)
}

/// A range's lock jobs: the package index listed (in a container of the first target's base)
/// into `releases.toml`, then every chosen release's lock input written from the template, and
/// the releases without a fresh lock returned to be locked.
#[allow(clippy::too_many_arguments)]
async fn range_jobs<E: Engine>(
    engine: &E,
    recipes: &RecipeBook,
    family: &str,
    versions: &str,
    pick: crate::recipe::releases::Pick,
    runtime: Option<&str>,
    config: &BackendConfig,
    emit: &mut (dyn FnMut(PrepareEvent) + Send),
) -> Result<Vec<crate::recipe::LockJob>, LockError> {
    let plan_err = |m: String| LockError::Input(m);
    let mut jobs = Vec::new();
    let range = crate::recipe::releases::Range::parse(versions).map_err(plan_err)?;
    let (package, first) = recipes.range_locking(family, runtime).map_err(plan_err)?;
    let base = images::ensure_base(engine, &first.base, &config.work_dir, emit).await?;
    emit(PrepareEvent::Locking { what: format!("the releases of {package} (listing the package index)") });
    // Every release with its publication time, from the index the tools use by default
    // (pip's own idea of it; npm's registry): `{"1.2.0": "2025-01-03T16:23:39Z", ...}`.
    let script = match first.locker {
        Locker::Uv => format!(
            "set -e; python3 -m venv /tmp/lister; SSL_CERT_FILE=/ca.pem /tmp/lister/bin/python -c '{}' {package}",
            PYPI_RELEASES.replace('\'', "\"")
        ),
        Locker::Npm => format!("set -e; npm_config_cafile=/ca.pem npm view {package} time --json"),
        // cargo names its index: a throwaway manifest on the package makes cargo fetch the
        // package's index entry, whose cached copy holds one JSON line per release.
        Locker::Cargo => CARGO_RELEASES.replace("{package}", &package),
    };
    let out =
        run_locker(engine, &base.image_id, script, Vec::new(), config, "list releases", Output::Data, emit)
            .await?;
    let text = out.join("\n");
    let parsed = match first.locker {
        Locker::Cargo => cargo_index_times(&text),
        _ => serde_json::from_str(&text).map_err(|e| e.to_string()),
    };
    let mut times: BTreeMap<String, String> = parsed.map_err(|e| {
        plan_err(format!(
            "the index listing of {package} is not a JSON object of release times ({e}): {text}"
        ))
    })?;
    times.retain(|v, _| crate::recipe::releases::is_release(v));
    let releases = crate::recipe::releases::Releases {
        package: package.clone(),
        listed: crate::record::now_rfc3339()[..10].to_string(),
        versions: crate::recipe::releases::Releases::normalise(times.keys().cloned()),
        uploaded: times,
    };
    if releases.versions.is_empty() {
        return Err(plan_err(format!("the package index listed no release of {package}")));
    }
    let family_dir = recipes.lockfiles_dir.join(family);
    std::fs::create_dir_all(&family_dir)
        .map_err(|e| LockError::Io { what: format!("create {}", family_dir.display()), source: e })?;
    let command = format!("benchlab lock {family} {versions}");
    releases
        .save(&family_dir, &command)
        .map_err(|e| LockError::Io { what: format!("write {}", family_dir.display()), source: e })?;
    // An index that re-published (or mirrored) releases reports times that run backwards
    // against the versions: the day bounds are then the index's word, not the release days.
    let backwards: Vec<String> = releases
        .versions
        .windows(2)
        .filter(|w| range.contains(&w[0]) && range.contains(&w[1]))
        .filter_map(|w| {
            let (a, b) = (releases.uploaded.get(&w[0])?, releases.uploaded.get(&w[1])?);
            (b < a).then(|| format!("{} ({a}) > {} ({b})", w[0], w[1]))
        })
        .collect();
    if !backwards.is_empty() {
        emit(PrepareEvent::BuildLog {
            line: format!(
                "warning: the index's publication times of {package} run backwards at {} place(s) (e.g. {}); each release is still locked as of its own listed day",
                backwards.len(),
                backwards[0]
            ),
        });
    }
    let chosen = range.select(&releases.versions, pick);
    if chosen.is_empty() {
        return Err(plan_err(format!("no release of {package} falls in {versions}")));
    }
    for v in &chosen {
        for job in recipes.lock_jobs(family, v, runtime, None).map_err(plan_err)? {
            let before = releases.uploaded.get(v).and_then(|t| crate::recipe::releases::end_of_day(t));
            recipes.write_lock_input(family, v, &job.runtime, before.as_deref()).map_err(plan_err)?;
            // Fresh locks are kept: a range is locked in one go and again only where needed.
            if crate::recipe::is_locked(&job.dir) {
                continue;
            }
            jobs.push(job);
        }
    }
    Ok(jobs)
}

/// `{version: publication time}` from a cargo index entry's lines (one JSON object per release,
/// `vers` and `pubtime`); yanked releases and lines without a publication time are left out.
fn cargo_index_times(text: &str) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct Line {
        vers: String,
        #[serde(default)]
        yanked: bool,
        pubtime: Option<String>,
    }
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        let l: Line = serde_json::from_str(line).map_err(|e| format!("an index line: {e}"))?;
        if let (false, Some(t)) = (l.yanked, l.pubtime) {
            out.insert(l.vers, t);
        }
    }
    if out.is_empty() {
        return Err("no index line with a publication time".into());
    }
    Ok(out)
}

/// Whether a locker's standard output is shown as it runs, or is data read back (a package
/// index listing: a line per release, too long to show); its standard error is always shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Shown,
    Data,
}

/// Runs a shell script in a container of `image` with egress and the CA bundle at /ca.pem;
/// returns its standard output lines, or an error with the tail of its output.
#[allow(clippy::too_many_arguments)]
async fn run_locker<E: Engine>(
    engine: &E,
    image: &str,
    script: String,
    mut mounts: Vec<Mount>,
    config: &BackendConfig,
    what: &str,
    output: Output,
    emit: &mut (dyn FnMut(PrepareEvent) + Send),
) -> Result<Vec<String>, LockError> {
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_RUN.to_string(), format!("lock-{}", std::process::id()));
    mounts.push(Mount::Bind { source: config.ca_bundle.clone(), target: "/ca.pem".into(), read_only: true });
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = engine
        .create_container(&ContainerSpec {
            name: format!("benchlab-lock-{}-{n}", std::process::id()),
            image: image.to_string(),
            cmd: vec!["sh".into(), "-c".into(), script],
            env: Vec::new(),
            labels,
            cpuset: String::new(),
            memory: None,
            nano_cpus: None,
            network: Network::Egress,
            mounts,
            sandbox: Sandbox::none(),
        })
        .await?;
    let result = async {
        engine.start(&id).await?;
        let mut tail: Vec<String> = Vec::new();
        let mut stdout: Vec<String> = Vec::new();
        engine
            .follow(&id, &mut |line| {
                let (text, shown) = match line {
                    OutputLine::Stdout(t) => {
                        stdout.push(t.clone());
                        (t, output == Output::Shown)
                    }
                    OutputLine::Stderr(t) => (t, true),
                };
                if shown {
                    emit(PrepareEvent::BuildLog { line: text.clone() });
                }
                tail.push(text);
                if tail.len() > 30 {
                    tail.remove(0);
                }
            })
            .await?;
        let exit = engine.wait(&id).await?;
        if exit.code != 0 {
            return Err(EngineError::op(
                "lock",
                what,
                format!("the locker exited with {}:\n{}", exit.code, tail.join("\n")),
            ));
        }
        Ok(stdout)
    }
    .await;
    let _ = engine.remove_container(&id).await;
    Ok(result?)
}
