//! A `concurrency` workload's shape keys as written → their typed form (`spec::Stage`, `Think`,
//! the flow, `SessionScope`, `WarmupExcludes`): `stages` and `start` (k6's ramping-vus), `think`,
//! `flow`, `session` and `warmup_excludes`, each refused at its span when it is wrong or where it
//! does not belong. The flow's tools are checked against the servers' suites by `validate`.

use serde::Deserialize;
use toml::Spanned;

use super::raw::{RawWorkload, SpanErr};
use super::workload::RawWarmup;
use crate::spec::{
    peak_vus, stages_ms, Lifecycle, SessionScope, Stage, Think, Warmup, WarmupExcludes, DEFAULT_THINK_SEED,
    LIST_STEP,
};
use crate::text::parse_duration_ms;

/// One stage as written: `{ duration = "10s", target = 50 }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStage {
    duration: Spanned<String>,
    target: Spanned<i64>,
}

/// The most virtual users a stage may want, as `workers` allows.
const MAX_VUS: i64 = 10_000;

/// A concurrency workload's shape, typed.
#[derive(Debug, Clone, Default)]
pub(super) struct Shape {
    pub(super) stages: Vec<Stage>,
    pub(super) start_vus: u32,
    pub(super) think: Option<Think>,
    pub(super) flow: Vec<Vec<String>>,
    pub(super) session: SessionScope,
    pub(super) warmup_excludes: WarmupExcludes,
}

impl RawWorkload {
    /// Refuses the shape keys on a workload of another kind than `concurrency`.
    pub(super) fn no_shape_keys(&self) -> Result<(), SpanErr> {
        let spans = [
            ("stages", self.stages.as_ref().map(|v| v.span())),
            ("start", self.start.as_ref().map(|v| v.span())),
            ("think", self.think.as_ref().map(|v| v.span())),
            ("flow", self.flow.as_ref().map(|v| v.span())),
            ("session", self.session.as_ref().map(|v| v.span())),
            ("warmup_excludes", self.warmup_excludes.as_ref().map(|v| v.span())),
        ];
        for (name, span) in spans {
            self.stray(name, span)?;
        }
        Ok(())
    }

    /// The shape keys of a `concurrency` workload.
    pub(super) fn shape(&self) -> Result<Shape, SpanErr> {
        let (stages, start_vus) = self.stages_of()?;
        let flow = self.flow_of()?;
        if flow.is_empty() {
            self.stray_unless("session", self.session.as_ref().map(|s| s.span()), "`flow`")?;
        }
        Ok(Shape {
            stages,
            start_vus,
            think: self.think_of()?,
            flow,
            session: self.session.as_ref().map(|s| *s.get_ref()).unwrap_or_default(),
            warmup_excludes: self.warmup_excludes.as_ref().map(|s| *s.get_ref()).unwrap_or_default(),
        })
    }

    /// `stages` and `start`: none, or at least one stage, each a duration and a target from 0
    /// to 10000, lasting more than 0 together and wanting at least one user at some point.
    fn stages_of(&self) -> Result<(Vec<Stage>, u32), SpanErr> {
        let Some(raw) = &self.stages else {
            self.stray_unless("start", self.start.as_ref().map(|s| s.span()), "`stages`")?;
            return Ok((Vec::new(), 0));
        };
        let mut stages = Vec::new();
        for s in raw.get_ref() {
            let s = s.get_ref();
            let duration_ms = parse_duration_ms(s.duration.get_ref())
                .map_err(|m| (s.duration.span(), format!("a stage's `duration`: {m}")))?;
            if !(0..=MAX_VUS).contains(s.target.get_ref()) {
                return Err((
                    s.target.span(),
                    format!("a stage's `target` is from 0 to {MAX_VUS} virtual users"),
                ));
            }
            stages.push(Stage { duration_ms, target: *s.target.get_ref() as u32 });
        }
        let start = self.start.as_ref().map_or(0, |s| *s.get_ref());
        if start > MAX_VUS as u32 {
            let sp = self.start.as_ref().map(|s| s.span()).expect("given");
            return Err((sp, format!("`start` is from 0 to {MAX_VUS} virtual users")));
        }
        if stages.is_empty() || stages_ms(&stages) == 0 || peak_vus(start, &stages) == 0 {
            return Err((
                raw.span(),
                "`stages` lists at least one stage, e.g. [{ duration = \"10s\", target = 50 }], lasting more than 0 together and wanting at least one virtual user".into(),
            ));
        }
        Ok((stages, start))
    }

    /// With stages: the warm-up (their first part: a fixed duration, \"0s\" when absent) and the
    /// measured rest, ms, and the one worker count (their peak; a `workers` that says otherwise,
    /// and a `duration`, are refused).
    pub(super) fn staged_time(&self, shape: &Shape) -> Result<(Warmup, u64, u32), SpanErr> {
        let total = stages_ms(&shape.stages);
        let peak = peak_vus(shape.start_vus, &shape.stages);
        if let Some(d) = &self.duration {
            return Err((
                d.span(),
                "`duration` does not go with `stages`: the load lasts the stages' sum".into(),
            ));
        }
        if let Some(w) = &self.workers {
            if w.get_ref().as_integer() != Some(i64::from(peak)) {
                return Err((
                    w.span(),
                    format!("with `stages`, `workers` is their peak target ({peak}); leave it out or make it {peak}"),
                ));
            }
        }
        let warmup = match &self.warmup {
            None => 0,
            Some(w) => match w.get_ref() {
                RawWarmup::Text(t) if t != "stable" => parse_duration_ms(t).map_err(|m| (w.span(), m))?,
                _ => {
                    return Err((
                        w.span(),
                        "with `stages`, `warmup` is a fixed duration (their first part), such as \"10s\""
                            .into(),
                    ))
                }
            },
        };
        if warmup >= total {
            let sp = self.warmup.as_ref().map(|w| w.span()).expect("a warm-up of 0 is shorter");
            return Err((sp, format!("`warmup` must be shorter than the stages ({total} ms together)")));
        }
        Ok((Warmup::Fixed(warmup), total - warmup, peak))
    }

    /// `think`: a duration, or `{ min = "50ms", max = "150ms", seed = 7 }` (uniform).
    fn think_of(&self) -> Result<Option<Think>, SpanErr> {
        let Some(v) = &self.think else {
            return Ok(None);
        };
        let bad = || {
            (
                v.span(),
                "`think` is a duration such as \"100ms\", or { min = \"50ms\", max = \"150ms\" } (uniform; `seed` optional)"
                    .to_string(),
            )
        };
        let ms = |x: Option<&toml::Value>| -> Result<u64, SpanErr> {
            let t = x.and_then(toml::Value::as_str).ok_or_else(bad)?;
            parse_duration_ms(t).map_err(|m| (v.span(), format!("`think`: {m}")))
        };
        let think = match v.get_ref() {
            toml::Value::String(_) => {
                let t = ms(Some(v.get_ref()))?;
                Think { min_ms: t, max_ms: t, seed: DEFAULT_THINK_SEED }
            }
            toml::Value::Table(t) => {
                if t.keys().any(|k| !["min", "max", "seed"].contains(&k.as_str())) {
                    return Err(bad());
                }
                let seed = match t.get("seed") {
                    None => DEFAULT_THINK_SEED,
                    Some(s) => s.as_integer().and_then(|n| u64::try_from(n).ok()).ok_or_else(bad)?,
                };
                let (min_ms, max_ms) = (ms(t.get("min"))?, ms(t.get("max"))?);
                if min_ms > max_ms {
                    return Err((v.span(), "`think`'s `min` is more than its `max`".into()));
                }
                Think { min_ms, max_ms, seed }
            }
            _ => return Err(bad()),
        };
        if think.max_ms > 600_000 {
            return Err((v.span(), "`think` is at most \"10m\"".into()));
        }
        Ok(Some(think))
    }

    /// `flow`: sessions of steps, none empty; with it, the lifecycle is iterations and `tool`,
    /// `mix` and `session_calls` have no place.
    fn flow_of(&self) -> Result<Vec<Vec<String>>, SpanErr> {
        let Some(flow) = &self.flow else {
            return Ok(Vec::new());
        };
        for (name, span) in [
            ("tool", self.tool.as_ref().map(|t| t.span())),
            ("mix", self.mix.as_ref().map(|t| t.span())),
            ("session_calls", self.session_calls.as_ref().map(|t| t.span())),
        ] {
            if let Some(sp) = span {
                return Err((sp, format!("`{name}` does not go with `flow`: the flow names every step")));
            }
        }
        if let Some(l) = self.lifecycle.as_ref().filter(|l| *l.get_ref() != Lifecycle::Iteration) {
            return Err((
                l.span(),
                "a `flow` runs iterations: leave `lifecycle` out or make it \"iteration\"".into(),
            ));
        }
        let shape_hint = "`flow` is a list of sessions, each a list of steps (a tool of the suite, or \"tools/list\"), e.g. [[\"echo\"], [\"tools/list\"]]";
        if flow.get_ref().is_empty() || flow.get_ref().len() > 100 {
            return Err((flow.span(), format!("{shape_hint}, from 1 to 100 sessions")));
        }
        let mut out = Vec::new();
        for session in flow.get_ref() {
            if session.get_ref().is_empty() || session.get_ref().len() > 1_000 {
                return Err((session.span(), format!("{shape_hint}; a session has from 1 to 1000 steps")));
            }
            for step in session.get_ref() {
                let s = step.get_ref();
                if s.is_empty() || (s.starts_with("tools/") && s != LIST_STEP) {
                    return Err((
                        step.span(),
                        format!("{s:?} is not a step: a tool of the suite, or \"tools/list\""),
                    ));
                }
            }
            out.push(session.get_ref().iter().map(|s| s.get_ref().clone()).collect());
        }
        Ok(out)
    }

    /// Where a flow names `tool`, for an error about it (None: no flow, or not there).
    pub(super) fn flow_span_of(&self, tool: &str) -> Option<std::ops::Range<usize>> {
        let flow = self.flow.as_ref()?;
        flow.get_ref().iter().flat_map(|s| s.get_ref()).find(|s| s.get_ref() == tool).map(|s| s.span())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Scenario;
    use crate::spec::{Lifecycle, Pace, SessionScope, Stage, Think, Warmup, WarmupExcludes, Workload};

    /// An HTTP server of the weekly suite (add_numbers, echo, word_count); a concurrency workload
    /// whose keys follow.
    const HEAD: &str = "name = \"s\"\n[[server]]\nid = \"http\"\nfamily = \"benchlab-null\"\n\
        transport = \"streamable-http\"\n[[workload]]\nkind = \"concurrency\"\n";

    fn parse(keys: &str) -> Result<Workload, String> {
        let s = Scenario::parse(Path::new("s.toml"), format!("{HEAD}{keys}")).map_err(|e| e.to_string())?;
        Ok(s.workloads[0].clone())
    }

    /// `keys` are refused at the first `at` on the line that starts with `line`, saying `says`.
    fn refused(keys: &str, line: &str, at: &str, says: &str) {
        let e = parse(keys).expect_err("refused");
        let src = format!("{HEAD}{keys}");
        let n = src.lines().position(|l| l.starts_with(line)).expect("the line") + 1;
        let col = src.lines().nth(n - 1).unwrap().find(at).expect("the place") + 1;
        assert!(e.starts_with(&format!("s.toml:{n}:{col}: ")), "{e}");
        assert!(e.contains(says), "{e}");
    }

    const K6: &str = "stages = [{ duration = \"10s\", target = 50 }, { duration = \"5m\", target = 50 }, \
        { duration = \"10s\", target = 0 }]\nwarmup = \"0s\"\nthink = \"100ms\"\n\
        flow = [[\"echo\"], [\"add_numbers\"], [\"word_count\"], [\"tools/list\"]]\n";

    #[test]
    fn the_k6_iteration_reads_as_stages_think_and_a_flow() {
        let w = parse(K6).unwrap();
        let Workload::Concurrency {
            tool,
            workers,
            warmup_ms,
            duration_ms,
            lifecycle,
            stages,
            start_vus,
            think,
            flow,
            session,
            warmup_excludes,
            ..
        } = &w
        else {
            panic!("{w:?}")
        };
        assert_eq!((tool.as_str(), *workers, *lifecycle), ("flow", 50, Lifecycle::Iteration));
        assert_eq!((*warmup_ms, *duration_ms), (Warmup::Fixed(0), 320_000), "nothing excluded");
        let st = |duration_ms, target| Stage { duration_ms, target };
        assert_eq!(stages, &[st(10_000, 50), st(300_000, 50), st(10_000, 0)]);
        assert_eq!(*start_vus, 0);
        assert_eq!(*think, Some(Think { min_ms: 100, max_ms: 100, seed: crate::spec::DEFAULT_THINK_SEED }));
        assert_eq!(flow.len(), 4);
        assert_eq!(flow[3], ["tools/list"]);
        assert_eq!((*session, *warmup_excludes), (SessionScope::PerIteration, WarmupExcludes::Everything));
        assert_eq!(w.tools(), ["echo", "add_numbers", "word_count"]);
        // `plan` and `run` expect the stages' sum and the idle phase after (30 s by default).
        let pace = Pace { spawn_s: 0.0, call_s: 0.0 };
        assert!((w.expected_seconds(pace) - (0.2 + 320.0 + 30.0 + 1.0)).abs() < 1e-9);
        // A warm-up is the stages' first part; `start` and a uniform think time with its seed.
        let keys = "stages = [{ duration = \"2s\", target = 4 }]\nstart = 2\nwarmup = \"500ms\"\n\
            think = { min = \"50ms\", max = \"150ms\", seed = 9 }\ntool = \"echo\"\nworkers = 4\n\
            warmup_excludes = \"latency\"\n";
        let Workload::Concurrency {
            warmup_ms,
            duration_ms,
            start_vus,
            think,
            lifecycle,
            warmup_excludes,
            ..
        } = parse(keys).unwrap()
        else {
            panic!()
        };
        assert_eq!((warmup_ms, duration_ms, start_vus), (Warmup::Fixed(500), 1_500, 2));
        assert_eq!(think, Some(Think { min_ms: 50, max_ms: 150, seed: 9 }));
        assert_eq!((lifecycle, warmup_excludes), (Lifecycle::Session, WarmupExcludes::Latency));
        let per_vu = parse(
            "flow = [[\"echo\", \"tools/list\"]]\nsession = \"per_vu\"\nworkers = 2\nduration = \"1s\"\n",
        );
        assert!(
            matches!(per_vu, Ok(Workload::Concurrency { session: SessionScope::PerVu, .. })),
            "{per_vu:?}"
        );
    }

    #[test]
    fn a_flow_step_the_suite_lacks_is_refused_at_itself() {
        let keys = "workers = 2\nduration = \"1s\"\nflow = [[\"echo\"], [\"tools/list\", \"fibonacci\"]]\n";
        refused(keys, "flow", "\"fibonacci\"", "has no tool \"fibonacci\"");
        let keys = "workers = 2\nduration = \"1s\"\nflow = [[\"echo\"], [\"tools/call\"]]\n";
        refused(keys, "flow", "\"tools/call\"", "\"tools/call\" is not a step");
        refused(
            "workers = 2\nduration = \"1s\"\nflow = [[\"echo\"], []]\n",
            "flow",
            "[]",
            "a session has from 1",
        );
        refused("workers = 2\nduration = \"1s\"\nflow = []\n", "flow", "[]", "from 1 to 100 sessions");
        let keys = "workers = 2\nduration = \"1s\"\ntool = \"echo\"\nflow = [[\"echo\"]]\n";
        refused(keys, "tool", "\"echo\"", "`tool` does not go with `flow`");
        let keys = "workers = 2\nduration = \"1s\"\nlifecycle = \"session\"\nflow = [[\"echo\"]]\n";
        refused(keys, "lifecycle", "\"session\"", "a `flow` runs iterations");
        let keys = "workers = 2\nduration = \"1s\"\ntool = \"echo\"\nsession = \"per_vu\"\n";
        refused(keys, "session", "\"per_vu\"", "`session` belongs only to a workload with `flow`");
        let keys = "workers = 2\nduration = \"1s\"\nflow = [[\"echo\"]]\nsession = \"per_user\"\n";
        refused(keys, "session", "\"per_user\"", "unknown variant");
    }

    #[test]
    fn stages_refuse_what_would_contradict_them() {
        let stages = "stages = [{ duration = \"1s\", target = 5 }, { duration = \"1s\", target = 0 }]\ntool = \"echo\"\n";
        refused(&format!("{stages}workers = 4\n"), "workers", "4", "`workers` is their peak target (5)");
        assert!(parse(&format!("{stages}workers = 5\n")).is_ok(), "the peak, stated");
        refused(&format!("{stages}duration = \"2s\"\n"), "duration", "\"2s\"", "does not go with `stages`");
        refused(
            &format!("{stages}warmup = \"2s\"\n"),
            "warmup",
            "\"2s\"",
            "shorter than the stages (2000 ms",
        );
        refused(&format!("{stages}warmup = \"stable\"\n"), "warmup", "\"stable\"", "a fixed duration");
        refused("tool = \"echo\"\nstages = []\n", "stages", "[]", "at least one stage");
        refused(
            "tool = \"echo\"\nstages = [{ duration = \"1s\", target = 0 }]\n",
            "stages",
            "[",
            "at least one virtual user",
        );
        refused(
            "tool = \"echo\"\nstages = [{ duration = \"1s\", target = -1 }]\n",
            "stages",
            "-1",
            "`target` is from 0",
        );
        refused(
            "tool = \"echo\"\nstages = [{ duration = \"1x\", target = 1 }]\n",
            "stages",
            "\"1x\"",
            "a stage's `duration`",
        );
        refused(
            "tool = \"echo\"\nstages = [{ duration = \"1s\", vus = 1 }]\n",
            "stages",
            "vus",
            "unknown field `vus`",
        );
        refused(
            "tool = \"echo\"\nworkers = 2\nduration = \"1s\"\nstart = 2\n",
            "start",
            "2",
            "belongs only to a workload with `stages`",
        );
    }

    #[test]
    fn think_is_a_duration_or_a_uniform_range() {
        let base = "tool = \"echo\"\nworkers = 2\nduration = \"1s\"\n";
        refused(
            &format!("{base}think = {{ min = \"150ms\", max = \"50ms\" }}\n"),
            "think",
            "{",
            "more than its `max`",
        );
        refused(&format!("{base}think = {{ min = \"50ms\" }}\n"), "think", "{", "`think` is a duration");
        refused(
            &format!("{base}think = {{ min = \"5ms\", max = \"9ms\", mean = \"7ms\" }}\n"),
            "think",
            "{",
            "`think` is a duration",
        );
        refused(&format!("{base}think = 100\n"), "think", "100", "`think` is a duration");
        refused(&format!("{base}think = \"11m\"\n"), "think", "\"11m\"", "at most \"10m\"");
    }

    #[test]
    fn the_shape_keys_belong_to_concurrency_alone() {
        let head = "name = \"s\"\n[[server]]\nid = \"http\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n";
        for (kind, keys) in [
            ("open_loop", "rate = 10\ntool = \"echo\"\nduration = \"1s\"\nthink = \"1s\"\n"),
            ("http_api", "workers = 1\ntool = \"echo\"\nduration = \"1s\"\nflow = [[\"echo\"]]\n"),
            ("open_loop", "rate = 10\ntool = \"echo\"\nduration = \"1s\"\nwarmup_excludes = \"latency\"\n"),
        ] {
            let src = format!("{head}[[workload]]\nkind = \"{kind}\"\n{keys}");
            let e = Scenario::parse(Path::new("s.toml"), src).expect_err("refused").to_string();
            assert!(e.contains(&format!("does not belong to a {kind} workload")), "{e}");
        }
    }
}
