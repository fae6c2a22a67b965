//! The container backend's images: a base bootstrapped here (debootstrap) or pulled by digest,
//! then a recipe image built from its content-hashed inputs — once; an image whose input hash the
//! engine holds already is a cache hit with no build call. One bootstrap per base at a time on a
//! host (a file lock), so two labs never make the same base twice.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use super::engine::Engine;
use crate::backend::{BackendConfig, EngineError, ImageProgress, ImageState, PrepareEvent, Prepared};
use crate::recipe::base::{self, BaseSource};
use crate::recipe::{ImagePlan, LABEL_INPUT_HASH};
use crate::record::manifest::BaseManifest;

/// Makes sure a base image exists: bootstrapped here, or pulled by digest.
pub async fn ensure_base<E: Engine>(
    engine: &E,
    source: &BaseSource,
    work_dir: &Path,
    emit: &mut (dyn FnMut(PrepareEvent) + Send),
) -> Result<BaseManifest, EngineError> {
    let reference = source.reference();
    let started = Instant::now();
    let manifest = |id: String, labels: &BTreeMap<String, String>| BaseManifest {
        reference: reference.clone(),
        image_id: id,
        suite: source.suite().map(String::from),
        rootfs_sha256: labels.get(base::LABEL_ROOTFS_SHA256).cloned(),
    };
    if let Some(img) = engine.image(&reference).await? {
        let same_spec = match source {
            BaseSource::Bootstrap { .. } => {
                img.labels.get(base::LABEL_BASE_SPEC) == Some(&source.spec_hash())
            }
            BaseSource::Registry { .. } => true,
        };
        if same_spec {
            emit(PrepareEvent::Ready {
                what: "base",
                reference: reference.clone(),
                cached: true,
                seconds: 0.0,
            });
            return Ok(manifest(img.id.clone(), &img.labels));
        }
    }
    match source {
        BaseSource::Registry { reference } => {
            let img = engine.pull(reference).await?;
            emit(PrepareEvent::Ready {
                what: "base",
                reference: reference.clone(),
                cached: false,
                seconds: started.elapsed().as_secs_f64(),
            });
            Ok(manifest(img.id.clone(), &img.labels))
        }
        BaseSource::Bootstrap { suite, packages } => {
            // One bootstrap per base at a time on this host: another benchlab making the same
            // base holds this lock, and when it is released the base is there.
            std::fs::create_dir_all(work_dir)
                .map_err(|e| EngineError::Io { what: format!("create {}", work_dir.display()), source: e })?;
            let lock_path = work_dir.join(format!("base-{}.lock", &source.spec_hash()[..12]));
            let _lock =
                tokio::task::spawn_blocking(move || lock_exclusive(&lock_path)).await.map_err(|e| {
                    EngineError::Io { what: "base lock task".into(), source: std::io::Error::other(e) }
                })??;
            if let Some(img) = engine.image(&reference).await? {
                if img.labels.get(base::LABEL_BASE_SPEC) == Some(&source.spec_hash()) {
                    emit(PrepareEvent::Ready {
                        what: "base",
                        reference: reference.clone(),
                        cached: true,
                        seconds: 0.0,
                    });
                    return Ok(manifest(img.id.clone(), &img.labels));
                }
            }
            emit(PrepareEvent::BaseBootstrapping { reference: reference.clone(), suite: suite.clone() });
            let work = work_dir.join(format!("base-{}", &source.spec_hash()[..12]));
            let _ = std::fs::remove_dir_all(&work);
            let (suite2, packages2, work2) = (suite.clone(), packages.clone(), work.clone());
            let rootfs = tokio::task::spawn_blocking(move || base::bootstrap(&suite2, &packages2, &work2))
                .await
                .map_err(|e| EngineError::Io {
                    what: "bootstrap task".into(),
                    source: std::io::Error::other(e),
                })?
                .map_err(|e| EngineError::Bootstrap { reference: reference.clone(), source: e })?;
            let mut labels = BTreeMap::new();
            labels.insert(base::LABEL_ROOTFS_SHA256.to_string(), rootfs.sha256.clone());
            labels.insert(base::LABEL_SUITE.to_string(), suite.clone());
            labels.insert(base::LABEL_BASE_SPEC.to_string(), source.spec_hash());
            let img = engine.import_rootfs(&rootfs.tar, &reference, &labels).await?;
            let _ = std::fs::remove_dir_all(&work);
            emit(PrepareEvent::Ready {
                what: "base",
                reference: reference.clone(),
                cached: false,
                seconds: started.elapsed().as_secs_f64(),
            });
            Ok(manifest(img.id, &labels))
        }
    }
}

/// Makes sure a cell's image exists; a known input hash is a cache hit with no build call.
pub async fn ensure_image<E: Engine>(
    engine: &E,
    plan: &ImagePlan,
    config: &BackendConfig,
    bases: &mut HashMap<String, BaseManifest>,
    progress: ImageProgress,
    emit: &mut (dyn FnMut(PrepareEvent) + Send),
) -> Result<Prepared, EngineError> {
    let mut base_for = async |source: &BaseSource,
                              emit: &mut (dyn FnMut(PrepareEvent) + Send)|
           -> Result<BaseManifest, EngineError> {
        let key = source.reference();
        if let Some(b) = bases.get(&key) {
            return Ok(b.clone());
        }
        let b = ensure_base(engine, source, &config.work_dir, emit).await?;
        bases.insert(key, b.clone());
        Ok(b)
    };
    let base = base_for(&plan.base, emit).await?;
    let fetch_base = match &plan.fetch_base {
        Some(f) => base_for(f, emit).await?,
        None => base.clone(),
    };
    let input_hash = plan.input_hash(&base.image_id, &fetch_base.image_id);
    if plan.build.is_none() {
        return Ok(Prepared {
            reference: base.reference.clone(),
            id: base.image_id.clone(),
            input_hash,
            base,
            built: false,
            launch: None,
            facts: None,
        });
    }
    let reference = plan.reference(&input_hash);
    let started = Instant::now();
    if let Some(img) = engine.image(&reference).await? {
        if img.labels.get(LABEL_INPUT_HASH) == Some(&input_hash) {
            emit(PrepareEvent::Ready {
                what: "image",
                reference: reference.clone(),
                cached: true,
                seconds: 0.0,
            });
            return Ok(Prepared {
                reference,
                id: img.id,
                input_hash,
                base,
                built: false,
                launch: None,
                facts: None,
            });
        }
    }
    emit(PrepareEvent::ImageBuilding { reference: reference.clone(), progress });
    let ca = std::fs::read(&config.ca_bundle).map_err(|e| EngineError::Io {
        what: format!(
            "read the CA bundle {} for the build's fetch stage (set SSL_CERT_FILE to another)",
            config.ca_bundle.display()
        ),
        source: e,
    })?;
    // The base is named by id, so a re-tagged base can never slip into a build.
    let context = plan
        .context_tar(&base.image_id, &fetch_base.image_id, &ca)
        .map_err(|e| EngineError::Io { what: "render the build context".into(), source: e })?;
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_INPUT_HASH.to_string(), input_hash.clone());
    labels.insert("org.benchlab.family".to_string(), plan.family.clone());
    labels.insert("org.benchlab.version".to_string(), plan.version.clone());
    let img = engine
        .build(context, &reference, &labels, &mut |line| {
            emit(PrepareEvent::BuildLog { line: line.to_string() })
        })
        .await?;
    emit(PrepareEvent::Ready {
        what: "image",
        reference: reference.clone(),
        cached: false,
        seconds: started.elapsed().as_secs_f64(),
    });
    Ok(Prepared { reference, id: img.id, input_hash, base, built: true, launch: None, facts: None })
}

/// Whether an image is in the engine already, without making anything.
pub async fn image_state<E: Engine>(engine: &E, plan: &ImagePlan) -> Result<ImageState, EngineError> {
    let base_id = |source: &BaseSource| {
        let reference = source.reference();
        async move { engine.image(&reference).await.map(|i| i.map(|i| i.id)) }
    };
    let Some(base) = base_id(&plan.base).await? else { return Ok(ImageState::BuildWithBase) };
    let fetch = match &plan.fetch_base {
        Some(f) => match base_id(f).await? {
            Some(id) => id,
            None => return Ok(ImageState::BuildWithBase),
        },
        None => base.clone(),
    };
    if plan.build.is_none() {
        return Ok(ImageState::Cached);
    }
    let input_hash = plan.input_hash(&base, &fetch);
    Ok(match engine.image(&plan.reference(&input_hash)).await? {
        Some(img) if img.labels.get(LABEL_INPUT_HASH) == Some(&input_hash) => ImageState::Cached,
        _ => ImageState::Build,
    })
}

/// Takes an exclusive advisory lock on `path` (created if needed), waiting for it; the lock is
/// held as long as the returned file is open.
fn lock_exclusive(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, EngineError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| EngineError::Io { what: format!("open {}", path.display()), source: e })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| EngineError::Io { what: format!("lock {}", path.display()), source: e.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::containers::fake::FakeEngine;
    use crate::recipe::BuildInputs;
    use crate::spec::ServerLaunch;

    fn plan(base: BaseSource, lock: &[u8]) -> ImagePlan {
        ImagePlan {
            family: "sdk".into(),
            version: "1.0".into(),
            api: "new".into(),
            runtime_name: "py".into(),
            runtime_kind: crate::recipe::RuntimeKind::Cpython,
            base,
            fetch_base: None,
            launch: ServerLaunch { argv: vec!["/srv/weekly.py".into()], env: vec![], cwd: None },
            http: None,
            source: None,
            fetched: None,
            build: Some(BuildInputs {
                dockerfile_template: "FROM {{BASE}}\n".into(),
                launcher: "python".into(),
                files: vec![("lock/requirements.txt".into(), lock.to_vec())],
                executables: Vec::new(),
                links: Vec::new(),
                recipe_entry: serde_json::json!({}),
            }),
        }
    }

    fn options(dir: &Path) -> BackendConfig {
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not a real bundle").unwrap();
        BackendConfig { ca_bundle: ca, work_dir: dir.join("work"), lab_volume_bytes: 1 << 20 }
    }

    fn with_base(engine: &FakeEngine, base: &BaseSource) {
        engine.add_image(&base.reference(), "sha256:base", &[(base::LABEL_BASE_SPEC, &base.spec_hash())]);
    }

    #[tokio::test]
    async fn an_image_is_built_once_then_found_by_its_input_hash() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        let base = BaseSource::bootstrap("bookworm", &["python3"]);
        with_base(&engine, &base);
        let p = plan(base, b"sdk==1.0");
        let mut bases = HashMap::new();
        let first =
            ensure_image(&engine, &p, &options(d.path()), &mut bases, ImageProgress::default(), &mut |_| {})
                .await
                .unwrap();
        let second =
            ensure_image(&engine, &p, &options(d.path()), &mut bases, ImageProgress::default(), &mut |_| {})
                .await
                .unwrap();
        assert_eq!(first.id, second.id);
        assert!(first.built && !second.built);
        let builds: Vec<String> = engine.calls().into_iter().filter(|c| c.starts_with("build ")).collect();
        assert_eq!(builds, [format!("build {}", first.reference)], "one build, then a cache hit");
        assert!(
            !engine.calls().iter().any(|c| c.starts_with("import")),
            "an existing base is not bootstrapped again"
        );
        // A changed lockfile is another image.
        let changed = plan(p.base.clone(), b"sdk==1.1");
        let third = ensure_image(
            &engine,
            &changed,
            &options(d.path()),
            &mut bases,
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_ne!(third.input_hash, first.input_hash);
        assert_eq!(engine.calls().iter().filter(|c| c.starts_with("build ")).count(), 2);
    }

    #[tokio::test]
    async fn an_image_under_the_same_name_with_other_inputs_is_rebuilt() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        let base = BaseSource::bootstrap("bookworm", &["python3"]);
        with_base(&engine, &base);
        let p = plan(base, b"sdk==1.0");
        let reference = p.reference(&p.input_hash("sha256:base", "sha256:base"));
        engine.add_image(&reference, "sha256:stale", &[(LABEL_INPUT_HASH, "something else")]);
        let ready = ensure_image(
            &engine,
            &p,
            &options(d.path()),
            &mut HashMap::new(),
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_ne!(ready.id, "sha256:stale");
        assert!(engine.calls().contains(&format!("build {reference}")));
    }

    #[tokio::test]
    async fn a_registry_base_that_cannot_be_pulled_says_how_to_bootstrap() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        engine.fail("pull", "no registry reachable");
        let base = BaseSource::Registry { reference: format!("debian@sha256:{}", "a".repeat(64)) };
        let err = ensure_image(
            &engine,
            &plan(base, b"x"),
            &options(d.path()),
            &mut HashMap::new(),
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("cannot be pulled") && err.contains("benchlab base --suite bookworm"), "{err}");
        assert!(
            !engine.calls().iter().any(|c| c.starts_with("build ")),
            "nothing is built on a missing base"
        );
    }
}
