//! The Slurm commands the backend runs (`sinfo`, `scontrol`, `sbatch`, `squeue`, `scancel`) as
//! processes with the cluster's `SLURM_CONF`, and pure parsers of what they print. Nothing else
//! in the lab talks to Slurm.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::backend::EngineError;

/// The Slurm client programs, pointed at one cluster.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// The cluster's slurm.conf (`SLURM_CONF`); the client's default when absent.
    pub conf: Option<PathBuf>,
}

/// One partition, as `scontrol show partition` tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionInfo {
    pub name: String,
    /// Its node list expression (`n[1-2]`).
    pub nodes: String,
    /// Its time limit in seconds; None: unlimited.
    pub max_time_s: Option<u64>,
    pub state: String,
    /// The cluster's default partition.
    pub default: bool,
}

/// One node, as `scontrol show node` tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    /// The CPUs jobs may have (CPUs less the ones its CpuSpecList keeps for the system).
    pub cpus: u32,
    pub memory_mb: u64,
    pub state: String,
    pub partitions: Vec<String>,
}

/// A job (or one task of an array) as `squeue` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// `123` or, for an array task, `123_4`.
    pub id: String,
    pub array_job_id: String,
    pub array_task_id: Option<u32>,
    /// PENDING, RUNNING, COMPLETED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, CANCELLED, ….
    pub state: String,
    pub nodes: String,
    /// Why it waits, or why it ended.
    pub reason: String,
    /// The job's comment (the lab's: `benchlab run <run id> owner <host>:<owner token>`).
    pub comment: String,
}

/// The squeue format [`parse_queue`] reads.
pub const QUEUE_FORMAT: &str = "%i|%T|%N|%r|%k";

impl Slurm {
    /// Runs a Slurm client program; its stdout, or an error with its stderr.
    pub async fn run(&self, program: &str, args: &[String]) -> Result<String, EngineError> {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args).kill_on_drop(true);
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let shown = format!("{program} {}", args.join(" "));
        let out = cmd.output().await.map_err(|e| {
            EngineError::op(
                "run",
                &shown,
                format!(
                    "{e}\n  the Slurm client programs must be installed here (Debian: slurm-client); \
                     `scripts/slurm-up.sh` brings up a two-node cluster on this machine"
                ),
            )
        })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(EngineError::op("run", shown, format!("{} ({})", err, out.status)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The Slurm version (`22.05.8`).
    pub async fn version(&self) -> Result<String, EngineError> {
        let out = self.run("sinfo", &["--version".into()]).await?;
        Ok(out.split_whitespace().last().unwrap_or("unknown").to_string())
    }

    /// The cluster's configuration (`scontrol show config`) as key → value; fails when no
    /// controller answers.
    pub async fn config(&self) -> Result<BTreeMap<String, String>, EngineError> {
        let out = self.run("scontrol", &["show".into(), "config".into()]).await?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(" = "))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect())
    }

    pub async fn partitions(&self) -> Result<Vec<PartitionInfo>, EngineError> {
        let out = self.run("scontrol", &["-o".into(), "show".into(), "partition".into()]).await?;
        Ok(out.lines().filter(|l| !l.trim().is_empty()).map(|l| parse_partition(&key_values(l))).collect())
    }

    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, EngineError> {
        let out = self.run("scontrol", &["-o".into(), "show".into(), "node".into()]).await?;
        Ok(out.lines().filter(|l| !l.trim().is_empty()).map(|l| parse_node(&key_values(l))).collect())
    }

    /// Submits a batch script; returns the job id (an array's job id for an array).
    pub async fn submit(&self, args: &[String]) -> Result<String, EngineError> {
        let mut all = vec!["--parsable".to_string()];
        all.extend(args.iter().cloned());
        let out = self.run("sbatch", &all).await?;
        // `--parsable` prints `<id>` or `<id>;<cluster>`.
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            return Err(EngineError::op("submit", "sbatch", format!("unexpected answer {:?}", out.trim())));
        }
        Ok(id)
    }

    /// Checks that sbatch would accept these options, submitting nothing (`--test-only`).
    pub async fn test_submit(&self, args: &[String]) -> Result<(), EngineError> {
        let mut all = vec!["--test-only".to_string()];
        all.extend(args.iter().cloned());
        all.push("--wrap=true".into());
        self.run("sbatch", &all).await.map(|_| ())
    }

    /// Every job and array task of this user the controller still knows (ended jobs stay for
    /// its MinJobAge).
    pub async fn queue(&self) -> Result<Vec<JobRow>, EngineError> {
        let args = ["-h", "-r", "--me", "--states=all", "-o", QUEUE_FORMAT].map(String::from);
        Ok(parse_queue(&self.run("squeue", &args).await?))
    }

    /// Cancels jobs (array job ids cancel every task).
    pub async fn cancel(&self, ids: &[String]) -> Result<(), EngineError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut args = vec!["--full".to_string()];
        args.extend(ids.iter().cloned());
        self.run("scancel", &args).await.map(|_| ())
    }
}

/// `Key=Value Key2=Value two` pairs of a `scontrol -o` line. Values may hold spaces (a node's
/// `Reason=…`), so a value runs to the next ` Key=`.
pub fn key_values(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut key: Option<String> = None;
    let mut value = String::new();
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == ':') => {
                if let Some(k) = key.take() {
                    out.insert(k, std::mem::take(&mut value));
                }
                key = Some(k.to_string());
                value = v.to_string();
            }
            _ => {
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(word);
            }
        }
    }
    if let Some(k) = key {
        out.insert(k, value);
    }
    out
}

fn parse_partition(kv: &BTreeMap<String, String>) -> PartitionInfo {
    let get = |k: &str| kv.get(k).cloned().unwrap_or_default();
    PartitionInfo {
        name: get("PartitionName"),
        nodes: get("Nodes"),
        max_time_s: parse_time_limit(&get("MaxTime")),
        state: get("State"),
        default: get("Default") == "YES",
    }
}

fn parse_node(kv: &BTreeMap<String, String>) -> NodeInfo {
    let num = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok());
    // CPUEfctv (22.05+) is CPUTot less the specialised CPUs; older Slurm: CPUTot.
    let cpus = num("CPUEfctv").or(num("CPUTot")).unwrap_or(0) as u32;
    NodeInfo {
        name: kv.get("NodeName").cloned().unwrap_or_default(),
        cpus,
        memory_mb: num("RealMemory").unwrap_or(0),
        state: kv.get("State").cloned().unwrap_or_default(),
        partitions: kv
            .get("Partitions")
            .map(|p| p.split(',').filter(|s| !s.is_empty()).map(String::from).collect())
            .unwrap_or_default(),
    }
}

/// A Slurm time limit (`UNLIMITED`, `30`, `1:30:00`, `2-00:00:00`) in seconds.
pub fn parse_time_limit(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("UNLIMITED") || s.eq_ignore_ascii_case("INFINITE") {
        return None;
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest.split(':').map(|p| p.parse::<u64>()).collect::<Result<_, _>>().ok()?;
    let secs = match parts.as_slice() {
        [m] if days == 0 => m * 60,
        [h] => h * 3600,
        [m, s] if days == 0 => m * 60 + s,
        [h, m] => h * 3600 + m * 60,
        [h, m, s] => h * 3600 + m * 60 + s,
        _ => return None,
    };
    Some(days * 86400 + secs)
}

/// `--time` for a job that must finish within `seconds`: whole minutes, rounded up.
pub fn time_arg(seconds: u64) -> String {
    format!("{}", seconds.div_ceil(60).max(1))
}

/// Lines of `squeue -o QUEUE_FORMAT`.
pub fn parse_queue(out: &str) -> Vec<JobRow> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().splitn(5, '|').collect();
            let [id, state, nodes, reason, comment] = f.as_slice() else { return None };
            // `%i` is `<array>_<task>` for an array's task (`%A` is then the task's own job id
            // once it runs, and `%a` is "(null)" while it waits: neither is read), or the job id.
            let (array_job_id, array_task_id) = match id.split_once('_') {
                Some((a, t)) => (a.to_string(), t.parse().ok()),
                None => (id.to_string(), None),
            };
            Some(JobRow {
                id: id.to_string(),
                array_job_id,
                array_task_id,
                state: state.to_string(),
                nodes: nodes.to_string(),
                reason: reason.to_string(),
                comment: comment.to_string(),
            })
        })
        .collect()
}

/// Whether a job in this state will not run again.
pub fn is_final(state: &str) -> bool {
    !matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "CONFIGURING"
            | "COMPLETING"
            | "REQUEUED"
            | "REQUEUE_FED"
            | "REQUEUE_HOLD"
            | "RESIZING"
            | "SUSPENDED"
            | "STAGE_OUT"
            | "SIGNALING"
            | "STOPPED"
            | "PREEMPTED"
            | "RESV_DEL_HOLD"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_lines_split_into_keys_with_values_that_hold_spaces() {
        let kv = key_values(
            "NodeName=n1 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUEfctv=1 CPUTot=2 RealMemory=8000 \
             State=DOWN+DRAIN Partitions=lab Reason=taken down by a test [root@2026-12-01T17:00:00]",
        );
        let node = parse_node(&kv);
        assert_eq!(node.name, "n1");
        assert_eq!(node.cpus, 1, "CPUEfctv wins over CPUTot");
        assert_eq!(node.memory_mb, 8000);
        assert_eq!(node.partitions, vec!["lab".to_string()]);
        assert_eq!(kv["Reason"], "taken down by a test [root@2026-12-01T17:00:00]");
        let p = parse_partition(&key_values(
            "PartitionName=lab Default=YES MaxTime=UNLIMITED Nodes=n[1-2] State=UP",
        ));
        assert_eq!((p.name.as_str(), p.nodes.as_str(), p.max_time_s), ("lab", "n[1-2]", None));
    }

    #[test]
    fn time_limits_read_every_slurm_form_and_round_up_to_minutes() {
        assert_eq!(parse_time_limit("UNLIMITED"), None);
        assert_eq!(parse_time_limit("30"), Some(1800));
        assert_eq!(parse_time_limit("1:30"), Some(90));
        assert_eq!(parse_time_limit("1:30:00"), Some(5400));
        assert_eq!(parse_time_limit("2-00:00:00"), Some(172800));
        assert_eq!(parse_time_limit("1-2"), Some(93600));
        assert_eq!(parse_time_limit("soon"), None);
        assert_eq!(time_arg(1), "1");
        assert_eq!(time_arg(60), "1");
        assert_eq!(time_arg(61), "2");
    }

    #[test]
    fn queue_rows_name_array_tasks_and_their_states() {
        let rows = parse_queue(
            "12_0|RUNNING|n1|None|benchlab run r owner h:1-2\n12_1|PENDING||Resources|(null)\n\
             13|NODE_FAIL|n2|NodeDown|a|b\n152_3|PENDING||None|(null)\nnoise\n",
        );
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[3].array_job_id.as_str(), rows[3].array_task_id), ("152", Some(3)));
        assert_eq!(rows[0].array_job_id, "12", "a running task's array comes from its id, not %A");
        assert_eq!(rows[0].array_task_id, Some(0));
        assert_eq!(rows[1].reason, "Resources");
        assert_eq!(rows[2].array_task_id, None);
        assert_eq!(rows[0].comment, "benchlab run r owner h:1-2");
        assert_eq!(rows[2].comment, "a|b", "the comment is the last field, whatever it holds");
        assert!(is_final("NODE_FAIL") && is_final("COMPLETED") && is_final("TIMEOUT"));
        assert!(!is_final("PENDING") && !is_final("RUNNING") && !is_final("COMPLETING"));
    }
}
