//! A fake engine for unit tests of the container backend's pure logic (image cache, base handling,
//! clean-up): it keeps images in memory, records every call, and fails where a test asks. It
//! runs nothing; the Docker end-to-end tests are what show the lab works.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use super::engine::{ContainerSpec, Engine, ExitState, ImageInfo, OutputLine};
use crate::backend::EngineError;
use crate::record::manifest::EngineManifest;

#[derive(Default)]
pub struct FakeEngine {
    images: Mutex<BTreeMap<String, ImageInfo>>,
    calls: Mutex<Vec<String>>,
    /// Every container created, as it was asked for.
    containers: Mutex<Vec<ContainerSpec>>,
    /// Operations (`pull`, `build`, ...) that fail with this message.
    fail: Mutex<BTreeMap<&'static str, String>>,
}

impl FakeEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts an image in the engine, as if it had been built or imported before.
    pub fn add_image(&self, reference: &str, id: &str, labels: &[(&str, &str)]) {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.images.lock().unwrap().insert(reference.into(), ImageInfo { id: id.into(), labels });
    }

    /// Makes an operation fail from now on.
    pub fn fail(&self, op: &'static str, message: &str) {
        self.fail.lock().unwrap().insert(op, message.into());
    }

    /// Every call so far, as `op reference`.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Every container created so far, as its spec.
    pub fn containers(&self) -> Vec<ContainerSpec> {
        self.containers.lock().unwrap().clone()
    }

    fn call(&self, op: &'static str, object: &str) -> Result<(), EngineError> {
        self.calls.lock().unwrap().push(format!("{op} {object}"));
        match self.fail.lock().unwrap().get(op) {
            Some(m) if op == "pull" => Err(EngineError::Pull { reference: object.into(), detail: m.clone() }),
            Some(m) => Err(EngineError::op(op, object, m)),
            None => Ok(()),
        }
    }
}

impl Engine for FakeEngine {
    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        self.call("describe", "")?;
        Ok(EngineManifest { kind: "fake".into(), version: "0".into(), api_version: "0".into() })
    }

    async fn image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        self.call("image", reference)?;
        Ok(self.images.lock().unwrap().get(reference).cloned())
    }

    async fn import_rootfs(
        &self,
        _tar: &Path,
        reference: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<ImageInfo, EngineError> {
        self.call("import", reference)?;
        let info = ImageInfo { id: format!("sha256:imported-{reference}"), labels: labels.clone() };
        self.images.lock().unwrap().insert(reference.into(), info.clone());
        Ok(info)
    }

    async fn pull(&self, reference: &str) -> Result<ImageInfo, EngineError> {
        self.call("pull", reference)?;
        let info = ImageInfo { id: format!("sha256:pulled-{reference}"), labels: BTreeMap::new() };
        self.images.lock().unwrap().insert(reference.into(), info.clone());
        Ok(info)
    }

    async fn push(&self, image: &str, repo: &str, tag: &str) -> Result<String, EngineError> {
        self.call("push", &format!("{image} {repo}:{tag}"))?;
        Ok(format!("{repo}@sha256:{}", crate::hash::sha256_hex(image.as_bytes())))
    }

    async fn repo_digests(&self, _: &str) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }

    async fn build(
        &self,
        context: Vec<u8>,
        reference: &str,
        labels: &BTreeMap<String, String>,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ImageInfo, EngineError> {
        self.call("build", reference)?;
        log(&format!("fake build of {} context bytes", context.len()));
        let info = ImageInfo { id: format!("sha256:built-{reference}"), labels: labels.clone() };
        self.images.lock().unwrap().insert(reference.into(), info.clone());
        Ok(info)
    }

    async fn create_volume(
        &self,
        name: &str,
        _size_bytes: u64,
        _labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        self.call("create_volume", name)
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        self.call("create_container", &spec.name)?;
        self.containers.lock().unwrap().push(spec.clone());
        Ok(spec.name.clone())
    }

    async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.call("start", id)
    }

    async fn follow(
        &self,
        id: &str,
        _on_line: &mut (dyn FnMut(OutputLine) + Send),
    ) -> Result<(), EngineError> {
        self.call("follow", id)
    }

    async fn output(
        &self,
        id: &str,
        _on_line: &mut (dyn FnMut(OutputLine) + Send),
    ) -> Result<(), EngineError> {
        self.call("output", id)
    }

    async fn wait(&self, id: &str) -> Result<ExitState, EngineError> {
        self.call("wait", id)?;
        Ok(ExitState { code: 0, oom_killed: false })
    }

    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>, EngineError> {
        self.call("read_file", &format!("{id}:{path}"))?;
        Ok(None)
    }

    async fn exec(
        &self,
        id: &str,
        argv: &[String],
        _env: &[(String, String)],
    ) -> Result<(i64, String), EngineError> {
        self.call("exec", &format!("{id}:{}", argv.join(" ")))?;
        Ok((0, String::new()))
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        self.call("remove_container", id)
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        self.call("remove_volume", name)
    }

    async fn remove_labelled(&self, label: &str) -> Result<usize, EngineError> {
        self.call("remove_labelled", label)?;
        Ok(0)
    }
}
