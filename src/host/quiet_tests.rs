//! Tests of the quiet-host check on fixture /proc and /sys trees written into a temp dir, and one
//! probe of the real host (its shape only: the machine is shared).

use super::*;

/// A fixture root; every write replaces what was there.
struct Fx(tempfile::TempDir);

/// The pid standing for this lab process in fixtures.
const LAB: u32 = 100;

impl Fx {
    fn new() -> Fx {
        let fx = Fx(tempfile::tempdir().unwrap());
        fx.write("proc/uptime", "100.00 150.00\n");
        fx
    }

    fn root(&self) -> &Path {
        self.0.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.0.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn uptime(&self, s: f64) {
        self.write("proc/uptime", &format!("{s:.2} 0.00\n"));
    }

    /// /proc/stat with one line per CPU: (user, system, idle, steal) ticks.
    fn stat(&self, cpus: &[(u32, u64, u64, u64, u64)]) {
        let mut text = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
        for (cpu, user, system, idle, steal) in cpus {
            text.push_str(&format!("cpu{cpu} {user} 0 {system} {idle} 0 0 0 {steal} 0 0\n"));
        }
        text.push_str("intr 0\nctxt 0\n");
        self.write("proc/stat", &text);
    }

    /// A process (pid, comm, ppid): its stat (utime = ticks, stime 0), affinity and cgroup text.
    fn proc(&self, (pid, comm, ppid): (u32, &str, u32), ticks: u64, start: u64, allowed: &str, cgroup: &str) {
        self.write(
            &format!("proc/{pid}/stat"),
            &format!("{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 {start} 0 0 0 0 0\n"),
        );
        self.write(
            &format!("proc/{pid}/status"),
            &format!("Name:\t{comm}\nPid:\t{pid}\nCpus_allowed_list:\t{allowed}\n"),
        );
        self.write(&format!("proc/{pid}/cgroup"), cgroup);
    }

    fn gone(&self, pid: u32) {
        std::fs::remove_dir_all(self.0.path().join(format!("proc/{pid}"))).unwrap();
    }

    fn cpufreq(&self, cpu: u32, khz: u64, governor: &str) {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        self.write(&format!("{dir}/scaling_cur_freq"), &format!("{khz}\n"));
        self.write(&format!("{dir}/scaling_governor"), &format!("{governor}\n"));
    }

    fn siblings(&self, cpu: u32, list: &str) {
        self.write(&format!("sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"), list);
    }

    fn psi(&self, avg10: f64) {
        self.write(
            "proc/pressure/memory",
            &format!(
                "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
        );
    }

    fn meminfo(&self, available_kib: u64, total_kib: u64) {
        self.write(
            "proc/meminfo",
            &format!("MemTotal: {total_kib} kB\nMemFree: 1 kB\nMemAvailable: {available_kib} kB\n"),
        );
    }

    fn snap(&self, cell: &[u32]) -> Snapshot {
        take(self.root(), cell)
    }
}

fn hz() -> u64 {
    clock_ticks() as u64
}

/// A window of `kind` between two snapshots of `fx`, the second taken after `change`.
fn between(fx: &Fx, cell: &[u32], own: &Own, kind: Kind, change: impl FnOnce(&Fx)) -> Window {
    let a = fx.snap(cell);
    change(fx);
    let b = fx.snap(cell);
    window(fx.root(), &a, &b, cell, own, kind)
}

fn quiet_window() -> Window {
    Window {
        wall_ms: 1000,
        per_cpu: vec![CpuLoad { cpu: 0, busy: 0.5, steal: 0.0 }, CpuLoad { cpu: 1, busy: 0.9, steal: 0.0 }],
        own_cpu: 1.4,
        other_cpu: 0.0,
        engine_cpu: None,
        offenders: Vec::new(),
        freq_min_khz: None,
        freq_max_khz: None,
        governors: None,
        smt_siblings: None,
        smt_busy: None,
        memory_pressure: Some(0.0),
        memory_available: Some(0.9),
    }
}

#[test]
fn cpu_deltas_give_busy_and_steal_fractions() {
    let fx = Fx::new();
    fx.stat(&[(0, 1000, 500, 8000, 0), (1, 100, 100, 9000, 10), (2, 0, 0, 0, 0)]);
    let w = between(&fx, &[0, 1], &Own::nothing().with_this(LAB), Kind::During, |fx| {
        fx.uptime(101.0);
        // cpu0: 30 busy of 100; cpu1: 50 busy, 5 steal of 100.
        fx.stat(&[(0, 1020, 510, 8070, 0), (1, 140, 110, 9045, 15), (2, 100, 0, 0, 0)]);
    });
    assert_eq!(w.wall_ms, 1000);
    assert_eq!(
        w.per_cpu,
        vec![CpuLoad { cpu: 0, busy: 0.3, steal: 0.0 }, CpuLoad { cpu: 1, busy: 0.5, steal: 0.05 }]
    );
    assert_eq!(parse_stat_cpus("cpu  1 2 3\ncpu7 1 2 3 4 5 6 7 8 9 10\n")[&7].total, 36);
}

#[test]
fn before_other_load_is_busy_less_this_process() {
    let fx = Fx::new();
    let h = hz();
    fx.stat(&[(0, 0, 0, 0, 0), (1, 0, 0, 0, 0)]);
    fx.proc((LAB, "benchlab", 1), 0, 5, "0-1", "0::/\n");
    let w = between(&fx, &[0, 1], &Own::nothing().with_this(LAB), Kind::Before, |fx| {
        fx.uptime(101.0);
        // 0.6 + 0.2 CPU busy; the lab process used 0.1 CPU of it.
        fx.stat(&[(0, h * 6 / 10, 0, h * 4 / 10, 0), (1, h * 2 / 10, 0, h * 8 / 10, 0)]);
        fx.proc((LAB, "benchlab", 1), h / 10, 5, "0-1", "0::/\n");
    });
    assert_eq!(w.own_cpu, 0.1);
    assert_eq!(w.other_cpu, 0.7);
    assert!(w.offenders.is_empty(), "{w:?}");
}

#[test]
fn during_other_load_splits_own_from_other_by_cgroup_affinity_and_descent() {
    let fx = Fx::new();
    let h = hz();
    let id = "4b1d".repeat(16);
    let in_cell = format!("4:memory:/docker/{id}\n3:cpuset:/docker/{id}\n");
    fx.stat(&[(0, 0, 0, 0, 0), (1, 0, 0, 0, 0)]);
    fx.proc((1, "init", 0), 0, 1, "0-3", "0::/\n");
    fx.proc((LAB, "benchlab", 1), 0, 5, "0-3", "0::/\n");
    fx.proc((200, "shim", 1), 0, 10, "1", &in_cell);
    fx.proc((201, "server", 200), 0, 11, "1", "0::/elsewhere\n"); // own by descent
    fx.proc((300, "dockerd", 1), 0, 3, "0-3", "0::/system.slice/docker.service\n");
    fx.proc((301, "python3", 1), 0, 4, "1", "0::/\n");
    fx.proc((302, "python3", 1), 0, 4, "0", "0::/\n");
    fx.proc((400, "pinned", 1), 0, 4, "2-3", "0::/\n"); // off the cell's CPUs
    fx.proc((500, "reused", 1), 50 * h, 4, "0-1", "0::/\n");
    fx.proc((600, "exits", 1), 0, 4, "0-1", "0::/\n");
    let own = Own::cgroups_containing(vec![id.clone()]).with_this(LAB);
    let w = between(&fx, &[0, 1], &own, Kind::During, |fx| {
        fx.uptime(102.0);
        fx.proc((LAB, "benchlab", 1), h / 5, 5, "0-3", "0::/\n");
        fx.proc((200, "shim", 1), h / 5, 10, "1", &in_cell);
        fx.proc((201, "server", 200), 2 * h, 11, "1", "0::/elsewhere\n");
        fx.proc((202, "child", LAB), h / 5, 12, "0-1", "0::/\n"); // born since, a child of the lab
        fx.proc((300, "dockerd", 1), h * 4 / 10, 3, "0-3", "0::/system.slice/docker.service\n");
        fx.proc((301, "python3", 1), h / 5, 4, "1", "0::/\n");
        fx.proc((302, "python3", 1), h / 10, 4, "0", "0::/\n");
        fx.proc((400, "pinned", 1), 10 * h, 4, "2-3", "0::/\n");
        fx.proc((500, "reused", 1), h / 5, 90, "0-1", "0::/\n"); // a new process: all of its time
        fx.gone(600);
    });
    // Own: lab 0.2 + shim 0.2 + server 2 + child 0.2 ticks-seconds over 2 s.
    assert_eq!(w.own_cpu, 1.3);
    // Other: python3 0.3 + reused 0.2, over 2 s; the engine (dockerd 0.4) apart.
    assert_eq!((w.other_cpu, w.engine_cpu), (0.25, Some(0.2)));
    let named: Vec<(&str, f64, u32)> =
        w.offenders.iter().map(|o| (o.comm.as_str(), o.cpu, o.processes)).collect();
    assert_eq!(named, vec![("python3", 0.15, 2), ("reused", 0.1, 1)]);
    let (noisy, reasons) = judge("0-1", None, Some(&w));
    assert!(noisy);
    assert_eq!(
        reasons,
        vec!["other processes used 0.25 CPU of cpus 0-1 during the cell (python3 0.15, reused 0.10)"]
    );
    // An engine busier than one cell makes it is a reason of its own.
    let busy = Window { engine_cpu: Some(1.2), other_cpu: 0.0, ..w.clone() };
    let (_, reasons) = judge("0-1", None, Some(&busy));
    assert_eq!(
        reasons,
        vec!["the container engine used 1.20 CPU during the cell, more than serving one cell takes"]
    );
}

#[test]
fn a_predicate_on_pids_marks_the_native_cells_processes() {
    let fx = Fx::new();
    let h = hz();
    fx.stat(&[(0, 0, 0, 0, 0)]);
    fx.proc((1, "init", 0), 0, 1, "0", "0::/\n");
    fx.proc((700, "driver", 1), 0, 7, "0", "0::/\n");
    fx.proc((701, "node", 1), 0, 7, "0", "4:memory:/benchlab/9.benchlab-native-x\n");
    let cgroup = "benchlab/9.benchlab-native-x".to_string();
    let own = Own::by(move |cg, pid| cg.contains(&cgroup) || pid == 700).with_this(LAB);
    let w = between(&fx, &[0], &own, Kind::During, |fx| {
        fx.uptime(101.0);
        fx.proc((700, "driver", 1), h, 7, "0", "0::/\n");
        fx.proc((701, "node", 1), h, 7, "0", "4:memory:/benchlab/9.benchlab-native-x\n");
    });
    assert_eq!(w.other_cpu, 0.0, "{w:?}");
}

#[test]
fn absent_cpufreq_is_none_and_present_gives_the_range_and_governors() {
    let fx = Fx::new();
    fx.stat(&[(0, 0, 0, 0, 0), (1, 0, 0, 0, 0)]);
    let own = Own::nothing().with_this(LAB);
    let w = between(&fx, &[0, 1], &own, Kind::During, |_| {});
    assert_eq!((w.freq_min_khz, w.freq_max_khz, w.governors.clone()), (None, None, None));
    assert_eq!(w.wall_ms, 0);
    fx.cpufreq(0, 2_000_000, "powersave");
    fx.cpufreq(1, 2_400_000, "powersave");
    let w = between(&fx, &[0, 1], &own, Kind::During, |fx| fx.cpufreq(1, 3_100_000, "performance"));
    assert_eq!((w.freq_min_khz, w.freq_max_khz), (Some(2_000_000), Some(3_100_000)));
    assert_eq!(w.governors, Some(vec!["performance".to_string(), "powersave".to_string()]));
    // Recorded, never a reason.
    assert_eq!(judge("0-1", Some(&w), None), (false, Vec::new()));
}

#[test]
fn smt_siblings_outside_the_cell_and_their_busy_fraction() {
    let fx = Fx::new();
    fx.stat(&[(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (2, 0, 0, 0, 0), (3, 0, 0, 0, 0)]);
    fx.siblings(0, "0,2\n");
    fx.siblings(1, "1,3\n");
    let own = Own::nothing().with_this(LAB);
    let w = between(&fx, &[0, 1], &own, Kind::During, |fx| {
        fx.stat(&[(0, 0, 0, 100, 0), (1, 0, 0, 100, 0), (2, 25, 0, 75, 0), (3, 5, 0, 95, 0)]);
    });
    assert_eq!((w.smt_siblings.as_deref(), w.smt_busy), (Some("2-3"), Some(0.25)));
    let (noisy, reasons) = judge("0-1", None, Some(&w));
    assert!(noisy);
    assert_eq!(
        reasons,
        vec!["SMT sibling cpus 2-3 of the cell's cores were up to 25 % busy during the cell"]
    );
    // A cell holding both threads of its core has no sibling outside it.
    fx.siblings(0, "0-1\n");
    fx.siblings(1, "0-1\n");
    let w = between(&fx, &[0, 1], &own, Kind::During, |_| {});
    assert_eq!((w.smt_siblings, w.smt_busy), (None, None));
}

#[test]
fn memory_pressure_where_psi_exists_and_available_memory_otherwise() {
    let fx = Fx::new();
    let own = Own::nothing().with_this(LAB);
    fx.meminfo(500, 10_000);
    let w = between(&fx, &[0], &own, Kind::During, |fx| fx.meminfo(300, 10_000));
    assert_eq!((w.memory_pressure, w.memory_available), (None, Some(0.03)));
    assert_eq!(judge("0", None, Some(&w)).1, vec!["only 3.0 % of memory was available during the cell"]);
    fx.psi(1.5);
    let w = between(&fx, &[0], &own, Kind::During, |fx| fx.psi(7.25));
    assert_eq!(w.memory_pressure, Some(7.25));
    // With PSI the stalls are judged, not the proxy.
    assert_eq!(
        judge("0", None, Some(&w)).1,
        vec!["memory pressure (PSI some avg10) reached 7.2 % during the cell"]
    );
    fx.psi(0.0);
    let w = between(&fx, &[0], &own, Kind::During, |_| {});
    assert_eq!(judge("0", None, Some(&w)), (false, Vec::new()));
}

#[test]
fn each_threshold_fires_on_its_own_and_a_quiet_window_has_no_reason() {
    let q = quiet_window();
    assert_eq!(judge("0-1", Some(&q), Some(&q)), (false, Vec::new()));
    let at = |f: fn(&mut Window)| {
        let mut w = quiet_window();
        f(&mut w);
        judge("0-1", Some(&w), None).1
    };
    assert_eq!(at(|w| w.other_cpu = MAX_OTHER_CPU), Vec::<String>::new());
    assert_eq!(
        at(|w| w.other_cpu = 0.11),
        vec!["other processes used 0.11 CPU of cpus 0-1 before the cell (no process seen: short-lived ones or the kernel)"]
    );
    assert_eq!(at(|w| w.per_cpu[1].steal = MAX_STEAL), Vec::<String>::new());
    assert_eq!(
        at(|w| w.per_cpu[1].steal = 0.041),
        vec!["the hypervisor stole 4.1 % of cpu 1 before the cell"]
    );
    assert_eq!(
        at(|w| {
            w.smt_siblings = Some("2-3".into());
            w.smt_busy = Some(0.11)
        })
        .len(),
        1
    );
    assert_eq!(at(|w| w.memory_pressure = Some(5.1)).len(), 1);
    assert_eq!(at(|w| w.memory_pressure = Some(MAX_MEMORY_PRESSURE)), Vec::<String>::new());
    assert_eq!(at(|w| w.memory_available = Some(0.01)), Vec::<String>::new());
    assert_eq!(
        at(|w| {
            w.memory_pressure = None;
            w.memory_available = Some(0.049)
        })
        .len(),
        1
    );
    // Both windows are judged, each named.
    let mut loud = quiet_window();
    loud.other_cpu = 0.5;
    loud.offenders = vec![Offender { comm: "cc1".into(), cpu: 0.5, processes: 3 }];
    let (noisy, reasons) = judge("1", Some(&loud), Some(&loud));
    assert!(noisy);
    assert_eq!(
        reasons,
        vec![
            "other processes used 0.50 CPU of cpus 1 before the cell (cc1 0.50)",
            "other processes used 0.50 CPU of cpus 1 during the cell (cc1 0.50)",
        ]
    );
}

#[test]
fn a_quiet_record_round_trips_and_matches_the_record_schema() {
    let mut w = quiet_window();
    w.offenders = vec![Offender { comm: "dockerd".into(), cpu: 0.02, processes: 1 }];
    w.freq_min_khz = Some(1_200_000);
    w.freq_max_khz = Some(3_000_000);
    w.governors = Some(vec!["schedutil".into()]);
    w.smt_siblings = Some("2-3".into());
    w.smt_busy = Some(0.01);
    let full = Quiet {
        noisy: false,
        reasons: Vec::new(),
        cpus: "0-1".into(),
        before: Some(w.clone()),
        during: Some(quiet_window()),
        wait: Some(Wait { limit_s: 30, waited_ms: 2500, probes: 3, quiet: true }),
    };
    let bare = Quiet {
        noisy: true,
        reasons: vec!["x".into()],
        cpus: "1".into(),
        before: None,
        during: None,
        wait: None,
    };
    // The file itself, not `record::SCHEMA`: `record` imports `host`, and an import back from a
    // test would make a cycle of modules.
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../record/record.schema.json")).unwrap();
    let quiet_schema = serde_json::json!({"$defs": schema["$defs"], "$ref": "#/$defs/quiet"});
    let validator = jsonschema::validator_for(&quiet_schema).unwrap();
    for q in [&full, &bare] {
        let json = serde_json::to_value(q).unwrap();
        let errors: Vec<String> = validator.iter_errors(&json).map(|e| e.to_string()).collect();
        assert_eq!(errors, Vec::<String>::new(), "{json}");
        assert_eq!(&serde_json::from_value::<Quiet>(json).unwrap(), q);
    }
    assert!(!serde_json::to_string(&bare).unwrap().contains("before"));
    let mut extra = serde_json::to_value(&full).unwrap();
    extra["during"]["surprise"] = 1.into();
    assert!(serde_json::from_value::<Quiet>(extra.clone()).is_err());
    assert!(!validator.iter_errors(&extra).collect::<Vec<_>>().is_empty());
}

#[test]
fn cell_cpus_join_the_server_and_driver_lists() {
    assert_eq!(cell_cpus(&["1", "0"]), vec![0, 1]);
    assert_eq!(cell_cpus(&["2-3", "3,5"]), vec![2, 3, 5]);
    assert_eq!(cell_cpus(&["x", "4"]), vec![4]);
    assert_eq!(
        parse_proc_stat("9 (a (b) c) R 7 0 0 0 0 0 0 0 0 0 3 4 0 0 0 0 1 0 55 0").unwrap().comm,
        "a (b) c"
    );
}

#[tokio::test]
async fn require_quiet_waits_for_a_quiet_probe_and_gives_up_on_a_loud_host() {
    let fx = Fx::new();
    fx.stat(&[(0, 0, 0, 0, 0)]);
    fx.psi(0.0);
    let mut check = QuietCheck::new(fx.root(), &["0", "0"]);
    check.before(Some(5)).await.unwrap();
    let q = check.finish();
    assert!(!q.noisy, "{q:?}");
    let wait = q.wait.unwrap();
    assert_eq!((wait.probes, wait.quiet, wait.limit_s), (1, true, 5));
    assert!(wait.waited_ms >= BEFORE_WINDOW.as_millis() as u64, "{wait:?}");

    // A pressure level does not need a delta: a loud fixture stays loud.
    fx.psi(40.0);
    let mut check = QuietCheck::new(fx.root(), &["0", "0"]);
    let detail = check.before(Some(1)).await.unwrap_err();
    assert!(detail.starts_with("the host stayed loud for "), "{detail}");
    assert!(detail.contains("memory pressure (PSI some avg10) reached 40.0 % before the cell"), "{detail}");
    let q = check.finish();
    assert!(q.noisy);
    let wait = q.wait.unwrap();
    assert_eq!((wait.probes, wait.quiet), (2, false), "{wait:?}");
    assert!(q.during.is_none());

    // Without --require-quiet: one probe, no wait, and a loud host only flags the cell.
    let mut check = QuietCheck::new(fx.root(), &["0", "0"]);
    check.before(None).await.unwrap();
    let q = check.finish();
    assert!(q.noisy && q.wait.is_none() && q.before.is_some());
}

#[tokio::test]
async fn the_real_host_probe_and_during_window_have_the_expected_shape() {
    let root = Path::new("/");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus: Vec<u32> = parse_cpu_list(&online).unwrap().into_iter().take(2).collect();
    let list = format_cpu_list(&cpus);
    let mut check = QuietCheck::new(root, &[&list]);
    check.before(None).await.unwrap();
    check.cell_started(Own::nothing()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    check.cell_ended().await;
    let q = check.finish();
    assert_eq!(q.cpus, list);
    let before = q.before.as_ref().unwrap();
    assert!((400..=2000).contains(&before.wall_ms), "{before:?}");
    assert_eq!(before.per_cpu.iter().map(|c| c.cpu).collect::<Vec<_>>(), cpus);
    for w in [before, q.during.as_ref().unwrap()] {
        assert!(w.per_cpu.iter().all(|c| (0.0..=1.0).contains(&c.busy) && (0.0..=1.0).contains(&c.steal)));
        assert!(w.other_cpu >= 0.0 && w.own_cpu >= 0.0, "{w:?}");
        assert!(w.offenders.len() <= TOP_OFFENDERS);
        assert!(w.memory_available.is_some_and(|a| a > 0.0 && a <= 1.0), "{w:?}");
    }
    assert_eq!(q.noisy, !q.reasons.is_empty());
    eprintln!("{}", serde_json::to_string_pretty(&q).unwrap());
}
