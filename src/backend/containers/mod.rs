//! The container backend: each cell in a server container and a sidecar on a container engine
//! (`engine`: the trait the lab owns; `docker`: bollard; `fake`: recorded calls for unit tests).
//! Images are made once per input hash (`images`), a cell runs in `cell`, and what dead runs
//! left behind is found by owner (`owners`).

pub mod cell;
pub mod docker;
pub mod engine;
pub mod fake;
pub mod images;
pub mod owners;
pub mod services;

use std::collections::HashMap;
use std::sync::Mutex;

pub use engine::*;

use super::{
    Admission, Backend, BackendConfig, BackendKind, CellEvent, CellOutcome, EngineError, ImageFacts,
    ImageProgress, ImageState, Leftover, PrepareEvent, Prepared, Topology,
};
use crate::recipe::ImagePlan;
use crate::record::manifest::{BaseManifest, EngineManifest};
use crate::spec::CellJob;

/// Cells in containers of an engine. See the module documentation.
pub struct ContainersBackend<E: Engine> {
    pub engine: E,
    config: BackendConfig,
    described: EngineManifest,
    /// Bases made or found in this process, by reference.
    bases: Mutex<HashMap<String, BaseManifest>>,
    /// What each image says of itself, read from its first cell's server container.
    facts: Mutex<HashMap<String, ImageFacts>>,
    /// This process's owner entry, once a run has started.
    owner: Mutex<Option<owners::OwnerEntry>>,
}

impl<E: Engine> ContainersBackend<E> {
    /// A backend on `engine`; asks the engine what it is once.
    pub async fn new(engine: E, config: BackendConfig) -> Result<ContainersBackend<E>, EngineError> {
        let described = engine.describe().await?;
        Ok(ContainersBackend {
            engine,
            config,
            described,
            bases: Mutex::default(),
            facts: Mutex::default(),
            owner: Mutex::default(),
        })
    }
}

impl<E: Engine> Backend for ContainersBackend<E> {
    fn kind(&self) -> BackendKind {
        BackendKind::Containers
    }

    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        Ok(self.described.clone())
    }

    fn topology(&self) -> Topology {
        Topology::host()
    }

    async fn admit(
        &self,
        _: Admission<'_>,
        _: &mut ImagePlan,
        _: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    async fn state(&self, image: &ImagePlan) -> ImageState {
        images::image_state(&self.engine, image).await.unwrap_or(ImageState::Unknown)
    }

    async fn prepare(
        &self,
        image: &ImagePlan,
        progress: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError> {
        // The bases found so far travel with the call (it awaits, so no lock is held across it).
        let mut bases = std::mem::take(&mut *self.bases.lock().expect("not poisoned"));
        let r = images::ensure_image(&self.engine, image, &self.config, &mut bases, progress, emit).await;
        self.bases.lock().expect("not poisoned").extend(bases);
        r
    }

    async fn run_cell(
        &self,
        job: &CellJob,
        prepared: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome {
        let mut on_event = |e| on_event(CellEvent::Driver(e));
        cell::run(&self.engine, job, prepared, self.config.lab_volume_bytes, &self.facts, &mut on_event).await
    }

    async fn start(&self, run_id: &str) -> Result<Vec<Leftover>, EngineError> {
        let (entry, found) = owners::sweep_leftovers(&self.engine, &self.config.work_dir, run_id).await?;
        *self.owner.lock().expect("not poisoned") = Some(entry);
        Ok(found)
    }

    async fn abandon(&self, run_id: &str) -> usize {
        self.engine.remove_labelled(&format!("{LABEL_RUN}={run_id}")).await.unwrap_or(0)
    }
}
