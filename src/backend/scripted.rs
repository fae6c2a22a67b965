//! A backend with canned outcomes, for the scheduler's unit tests and the CLI's hidden
//! `run --engine scripted` (never the test that shows a feature works): cells succeed after a
//! delay, fail with a named reason, or hang until they are abandoned; it offers whatever CPU
//! topology it is given and records every call, which cells ran at once and on which CPUs. Its
//! records say `scripted` as their engine.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{
    Admission, Backend, BackendKind, CellEvent, CellOutcome, EngineError, ImageFacts, ImageProgress,
    ImageState, Leftover, PrepareEvent, Prepared, Topology,
};
use crate::recipe::ImagePlan;
use crate::record::manifest::{BaseManifest, EngineManifest};
use crate::spec::{CellJob, DriverEvent, DriverOutcome, Failure, FailureReason, Placement};

/// What a scripted cell does.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    /// Succeeds after this long, with one cold start of this many nanoseconds.
    Ok { after: Duration, cold_start_ns: u64 },
    /// Fails with this reason after this long.
    Fail { after: Duration, reason: FailureReason },
    /// Never ends (until abandoned).
    Hang,
}

impl Script {
    /// A script as the CLI's hidden `--script CELL=WHAT` spells it: `ok`, `ok:50ms`, `hang`,
    /// `fail:crash`, `fail:timeout:2s` (a reason as records name it, then how long before).
    pub fn parse(s: &str) -> Result<Script, String> {
        let mut parts = s.split(':');
        let after = |p: Option<&str>| -> Result<Duration, String> {
            p.map_or(Ok(Duration::ZERO), |d| crate::text::parse_duration_ms(d).map(Duration::from_millis))
        };
        let script = match parts.next() {
            Some("ok") => Script::Ok { after: after(parts.next())?, cold_start_ns: 1_000_000 },
            Some("hang") => Script::Hang,
            Some("fail") => {
                let reason =
                    parts.next().ok_or_else(|| format!("{s:?}: fail needs a reason (fail:crash)"))?;
                let reason =
                    serde_json::from_value(serde_json::Value::String(reason.into())).map_err(|_| {
                        format!("{s:?}: {reason:?} is no failure reason (crash, timeout, oom, ...)")
                    })?;
                Script::Fail { after: after(parts.next())?, reason }
            }
            _ => return Err(format!("{s:?}: expected ok[:DURATION], hang or fail:REASON[:DURATION]")),
        };
        match parts.next() {
            Some(extra) => Err(format!("{s:?}: unexpected {extra:?}")),
            None => Ok(script),
        }
    }
}

/// See the module documentation.
pub struct ScriptedBackend {
    topology: Topology,
    default: Script,
    scripts: BTreeMap<String, Script>,
    /// Every call: `prepare <family> <version>`, `run <cell>`, `abandon <run>`.
    calls: Mutex<Vec<String>>,
    /// The cells running now, with their placements.
    running: Mutex<Vec<(String, Placement)>>,
    /// Every set of cells that ran at once (when more than one did).
    together: Mutex<Vec<Vec<(String, Placement)>>>,
}

impl ScriptedBackend {
    /// Every cell runs `default` unless `script` names it.
    pub fn new(topology: Topology, default: Script) -> ScriptedBackend {
        ScriptedBackend {
            topology,
            default,
            scripts: BTreeMap::new(),
            calls: Mutex::default(),
            running: Mutex::default(),
            together: Mutex::default(),
        }
    }

    /// `cpus` logical CPUs, two threads per physical core (CPUs 2k and 2k+1 share core k).
    pub fn smt_topology(cpus: u32) -> Topology {
        Topology { cpus: (0..cpus).collect(), cores: (0..cpus).map(|c| (c, (0, c / 2))).collect() }
    }

    pub fn script(mut self, cell_id: &str, script: Script) -> ScriptedBackend {
        self.scripts.insert(cell_id.to_string(), script);
        self
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("not poisoned").clone()
    }

    pub fn together(&self) -> Vec<Vec<(String, Placement)>> {
        self.together.lock().expect("not poisoned").clone()
    }

    /// How many cells are running now.
    pub fn running(&self) -> usize {
        self.running.lock().expect("not poisoned").len()
    }

    fn call(&self, c: String) {
        self.calls.lock().expect("not poisoned").push(c);
    }
}

/// Takes a cell off the running list when its future ends or is dropped (abandoned).
struct Running<'a>(&'a ScriptedBackend, String);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.lock().expect("not poisoned").retain(|(id, _)| *id != self.1);
    }
}

impl Backend for ScriptedBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Scripted
    }

    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        Ok(EngineManifest { kind: "scripted".into(), version: "0".into(), api_version: "0".into() })
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }

    async fn admit(
        &self,
        _: Admission<'_>,
        _: &mut ImagePlan,
        _: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    async fn state(&self, _: &ImagePlan) -> ImageState {
        ImageState::Build
    }

    async fn prepare(
        &self,
        image: &ImagePlan,
        _: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError> {
        self.call(format!("prepare {} {} {}", image.family, image.version, image.runtime_name));
        let reference = format!("scripted/{}:{}-{}", image.family, image.version, image.runtime_name);
        emit(PrepareEvent::Ready {
            what: "image",
            reference: reference.clone(),
            cached: false,
            seconds: 0.0,
        });
        Ok(Prepared {
            id: crate::hash::sha256_hex(reference.as_bytes()),
            input_hash: crate::hash::sha256_hex(reference.as_bytes()),
            reference,
            base: BaseManifest {
                reference: "scripted".into(),
                image_id: String::new(),
                suite: None,
                rootfs_sha256: None,
            },
            built: true,
            launch: None,
            facts: None,
        })
    }

    async fn run_cell(
        &self,
        job: &CellJob,
        _: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome {
        self.call(format!("run {}", job.cell_id));
        let _running = {
            let mut running = self.running.lock().expect("not poisoned");
            running.push((job.cell_id.clone(), job.placement.clone()));
            if running.len() > 1 {
                self.together.lock().expect("not poisoned").push(running.clone());
            }
            Running(self, job.cell_id.clone())
        };
        on_event(CellEvent::Driver(DriverEvent::Progress { phase: "scripted".into(), done: 0, total: 1 }));
        let facts = ImageFacts { runtime_version: Some("0".into()), ..ImageFacts::default() };
        match self.scripts.get(&job.cell_id).unwrap_or(&self.default).clone() {
            Script::Ok { after, cold_start_ns } => {
                tokio::time::sleep(after).await;
                let driver = DriverOutcome { cold_start_ns: vec![cold_start_ns], ..DriverOutcome::default() };
                CellOutcome {
                    driver,
                    failure: None,
                    facts,
                    sandbox: Some(job.sandbox.clone()),
                    ..CellOutcome::default()
                }
            }
            Script::Fail { after, reason } => {
                tokio::time::sleep(after).await;
                let failure = Some(Failure::new(reason, "scripted failure"));
                CellOutcome { failure, facts, sandbox: Some(job.sandbox.clone()), ..CellOutcome::default() }
            }
            Script::Hang => std::future::pending().await,
        }
    }

    async fn start(&self, run_id: &str) -> Result<Vec<Leftover>, EngineError> {
        self.call(format!("start {run_id}"));
        Ok(Vec::new())
    }

    async fn abandon(&self, run_id: &str) -> usize {
        self.call(format!("abandon {run_id}"));
        self.running()
    }
}

#[cfg(test)]
mod tests {
    use super::Script;
    use crate::spec::FailureReason;
    use std::time::Duration;

    #[test]
    fn scripts_parse_as_the_cli_spells_them_and_bad_ones_say_what_is_expected() {
        assert_eq!(Script::parse("ok"), Ok(Script::Ok { after: Duration::ZERO, cold_start_ns: 1_000_000 }));
        assert_eq!(
            Script::parse("ok:50ms"),
            Ok(Script::Ok { after: Duration::from_millis(50), cold_start_ns: 1_000_000 })
        );
        assert_eq!(Script::parse("hang"), Ok(Script::Hang));
        assert_eq!(
            Script::parse("fail:wrong_result:2s"),
            Ok(Script::Fail { after: Duration::from_secs(2), reason: FailureReason::WrongResult })
        );
        for (bad, says) in [
            ("fail", "needs a reason"),
            ("fail:bogus", "no failure reason"),
            ("ok:5", "unknown unit"),
            ("hang:1s", "unexpected"),
            ("sleep", "expected ok"),
        ] {
            let err = Script::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
