//! Unit tests of scenario parsing, validation and matrix expansion.

use super::*;
use crate::spec::{Memory, PlacementMode};
use crate::text::{parse_duration_ms, parse_memory};

const GOOD: &str = r#"
name = "t"
suite = "weekly"
[placement]
mode = "split"
memory = "512MiB"

[[server]]
id = "null"
family = "benchlab-null"

[[server]]
id = "mcp"
family = "python-mcp"
version = "2.3.0"

[[workload]]
kind = "cold_start"
spawns = 3

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 10
calls = 100
"#;

fn parse(s: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(Path::new("scenarios/t.toml"), s.to_string())
}

#[test]
fn expands_servers_times_workloads() {
    let s = parse(GOOD).unwrap();
    assert_eq!(s.placement.memory, Memory(512 << 20));
    let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
    assert_eq!(ids, ["null/cold_start", "null/serial_calls", "mcp/cold_start", "mcp/serial_calls"]);
}

#[test]
fn unknown_keys_are_refused_with_line_and_column() {
    let bad = GOOD.replace("spawns = 3", "spawns = 3\nspwans = 4");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:20:1: "), "{e}");
    assert!(e.contains("spwans"), "{e}");
    let bad = GOOD.replace("spawns = 3", "spawns = 3\ncalls = 4");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:20:9: ") && e.contains("does not belong"), "{e}");
    let bad = GOOD.replace("mode = \"split\"", "mode = \"split\"\ncores = 2");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:6:1: ") && e.contains("cores"), "{e}");
    // `cpus` is a quota in CPUs: a positive number, refused at its value otherwise.
    let bad = GOOD.replace("mode = \"split\"", "mode = \"split\"\ncpus = -1");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:6:8: ") && e.contains("CPU quota"), "{e}");
    let good = parse(&GOOD.replace("mode = \"split\"", "mode = \"split\"\ncpus = 1.5")).unwrap();
    assert_eq!(good.placement.cpus.map(|c| c.nano_cpus()), Some(1_500_000_000));
}

#[test]
fn wrong_types_are_refused_with_line_and_column() {
    let bad = GOOD.replace("spawns = 3", "spawns = \"three\"");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:19:10: "), "{e}");
    let bad = GOOD.replace("memory = \"512MiB\"", "memory = \"512MB\"");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:6:10: ") && e.contains("unknown unit"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_entry() {
    let bad = GOOD.replace("tool = \"add_numbers\"", "tool = \"fibonacci\"");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.contains("scenarios/t.toml:") && e.contains("no tool \"fibonacci\""), "{e}");
    let bad = GOOD.replace("id = \"mcp\"", "id = \"null\"");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:13:6: ") && e.contains("used twice"), "{e}");
}

#[test]
fn globs_and_durations() {
    assert!(glob_match("gradio-*/mcp-echo-*", "gradio-cl1/mcp-echo-w10"));
    assert!(!glob_match("gradio-*/mcp-echo-*", "fastmcp/mcp-echo-w10"));
    assert!(glob_match("*", "x"));
    assert!(glob_match("a*b*c", "abc") && !glob_match("a*b*c", "acb"));
    assert!(glob_match("null/cold_start", "null/cold_start") && !glob_match("null", "null/x"));
    assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
    assert_eq!(parse_duration_ms("250ms"), Ok(250));
    assert_eq!(parse_duration_ms("2m"), Ok(120_000));
    assert!(parse_duration_ms("10").is_err() && parse_duration_ms("5d").is_err());
    assert_eq!(parse_duration_ms("24h"), Ok(86_400_000));
    assert!(parse_duration_ms("25h").is_err(), "at most a day");
}

#[test]
fn http_workloads_expand_worker_lists_and_check_transports() {
    let http = GOOD.replace("family = \"benchlab-null\"", "family = \"benchlab-null\"\ntransport = \"streamable-http\"")
        + "\n[[workload]]\nkind = \"concurrency\"\ntool = \"echo\"\nworkers = [1, 10]\nduration = \"2s\"\nservers = [\"null\"]\n";
    let e = parse(&http).unwrap_err().to_string();
    assert!(e.contains("runs over stdio") && e.contains("\"null\""), "{e}");
    let fixed = http
        .replace(
            "kind = \"cold_start\"\nspawns = 3",
            "kind = \"cold_start\"\nspawns = 3\nservers = [\"mcp\"]",
        )
        .replace("warmup = 10\ncalls = 100", "warmup = 10\ncalls = 100\nservers = [\"mcp\"]");
    let s = parse(&fixed).unwrap();
    let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
    assert_eq!(ids, ["null/concurrency-w1", "null/concurrency-w10", "mcp/cold_start", "mcp/serial_calls"]);
    let bad = fixed.replace("workers = [1, 10]", "workers = [1, 1]");
    assert!(parse(&bad).unwrap_err().to_string().contains("twice"));
    let bad = fixed.replace("duration = \"2s\"", "duration = \"2 parsecs\"");
    assert!(parse(&bad).unwrap_err().to_string().contains("unknown unit"));
}

#[test]
fn a_workloads_servers_may_be_patterns_that_stand_for_every_id_they_match() {
    // A second HTTP server, so that a pattern picks two ids and leaves the stdio one out.
    let http = GOOD.replace("family = \"benchlab-null\"", "family = \"benchlab-null\"\ntransport = \"streamable-http\"")
        + "\n[[server]]\nid = \"null-b\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n"
        + "\n[[workload]]\nkind = \"concurrency\"\ntool = \"echo\"\nworkers = [10]\nduration = \"2s\"\nservers = [\"null*\"]\n";
    let fixed = http
        .replace("kind = \"cold_start\"\nspawns = 3", "kind = \"cold_start\"\nspawns = 3\nservers = [\"m*\"]")
        .replace("warmup = 10\ncalls = 100", "warmup = 10\ncalls = 100\nservers = [\"mcp\"]");
    let s = parse(&fixed).unwrap();
    let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
    assert_eq!(ids, ["null/concurrency-w10", "mcp/cold_start", "mcp/serial_calls", "null-b/concurrency-w10"]);
    // A pattern that matches nothing is refused at the list, as an unknown id is.
    let e = parse(&fixed.replace("[\"m*\"]", "[\"rmcp-*\"]")).unwrap_err().to_string();
    assert!(
        e.contains("\"rmcp-*\", a pattern that matches no [[server]] id") && e.contains("t.toml:"),
        "{e}"
    );
    let e = parse(&fixed.replace("[\"m*\"]", "[\"mpc\"]")).unwrap_err().to_string();
    assert!(e.contains("\"mpc\", no [[server]] id"), "{e}");
    // A pattern over servers of both kinds still meets the transport check.
    let e = parse(&fixed.replace("[\"m*\"]", "[\"*\"]")).unwrap_err().to_string();
    assert!(e.contains("runs over stdio"), "{e}");
}

#[test]
fn the_idle_phase_after_a_load_defaults_to_30_s_and_is_checked_at_its_key() {
    let base = GOOD.replace("family = \"benchlab-null\"", "family = \"benchlab-null\"\ntransport = \"streamable-http\"")
        .replace("kind = \"cold_start\"\nspawns = 3", "kind = \"cold_start\"\nspawns = 3\nservers = [\"mcp\"]")
        .replace("warmup = 10\ncalls = 100", "warmup = 10\ncalls = 100\nservers = [\"mcp\"]")
        + "\n[[workload]]\nkind = \"open_loop\"\ntool = \"echo\"\nrate = 100\nduration = \"2s\"\nservers = [\"null\"]\n";
    let idle = |text: &str| parse(text).unwrap().cells()[0].workload.idle_after_ms();
    assert_eq!(idle(&base), 30_000);
    assert_eq!(idle(&base.replace("rate = 100", "rate = 100\nidle_after = \"3s\"")), 3_000);
    assert_eq!(idle(&base.replace("rate = 100", "rate = 100\nidle_after = \"0s\"")), 0);
    // Line 34 is `idle_after`; the column is its value's.
    let bad = base.replace("rate = 100", "rate = 100\nidle_after = \"3 fortnights\"");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:34:14: ") && e.contains("unknown unit"), "{e}");
    let e = parse(&base.replace("rate = 100", "rate = 100\nidle_after = 3")).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:34:14: ") && e.contains("a duration"), "{e}");
    let e = parse(&base.replace("rate = 100", "rate = 100\nidle_after = \"90m\"")).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:34:14: ") && e.contains("at most"), "{e}");
    // Not a key of a stdio workload.
    let e = parse(&base.replace("spawns = 3", "spawns = 3\nidle_after = \"1s\"")).unwrap_err().to_string();
    assert!(e.contains("`idle_after` does not belong to a cold_start workload"), "{e}");
}

#[test]
fn memory_units() {
    assert_eq!(parse_memory("1GiB"), Ok(1 << 30));
    assert_eq!(parse_memory("4096"), Ok(4096));
    assert!(parse_memory("1GB").is_err());
}

#[test]
fn line_col_counts_from_one() {
    assert_eq!(line_col("ab\ncd", 0), (1, 1));
    assert_eq!(line_col("ab\ncd", 4), (2, 2));
}

const MATRIX: &str = r#"
name = "m"
[[matrix]]
id = "mcp-{version}-{runtime}"
family = "python-mcp"
versions = "1.1.2..1.x"
pick = "latest-patch"
runtimes = ["cpython-bookworm", "cpython-trixie"]
api = "lowlevel"

[[workload]]
kind = "cold_start"
spawns = 2
"#;

fn with_releases(versions: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("python-mcp")).unwrap();
    let list: Vec<String> = versions.iter().map(|v| format!("{v:?}")).collect();
    std::fs::write(
        d.path().join("python-mcp/releases.toml"),
        format!("package = \"mcp\"\nlisted = \"2026-11-30\"\nversions = [{}]\n", list.join(", ")),
    )
    .unwrap();
    d
}

#[test]
fn a_matrix_expands_ranges_and_axes_into_servers() {
    let d = with_releases(&["1.0.0", "1.1.2", "1.1.3", "1.2.0", "1.2.1", "1.10.0", "2.0.0"]);
    let s = Scenario::parse_in(Path::new("m.toml"), MATRIX.into(), d.path()).unwrap();
    let ids: Vec<&str> = s.servers.iter().map(|x| x.id.get_ref().as_str()).collect();
    assert_eq!(
        ids,
        [
            "mcp-1.1.2-cpython-bookworm",
            "mcp-1.1.2-cpython-trixie",
            "mcp-1.1.3-cpython-bookworm",
            "mcp-1.1.3-cpython-trixie",
            "mcp-1.2.1-cpython-bookworm",
            "mcp-1.2.1-cpython-trixie",
            "mcp-1.10.0-cpython-bookworm",
            "mcp-1.10.0-cpython-trixie",
        ]
    );
    assert!(s.servers.iter().all(|x| x.api.as_ref().map(|a| a.get_ref().as_str()) == Some("lowlevel")));
    // A sweep runs every cell three times unless it says otherwise.
    assert_eq!((s.repeats, s.cells().len()), (3, 24));
}

#[test]
fn a_matrix_takes_a_soak_so_a_sweep_can_find_where_a_leak_appeared() {
    let d = with_releases(&["1.1.2", "1.2.1", "1.10.0"]);
    let src = MATRIX.replace("api = ", "transports = [\"streamable-http\"]\napi = ").replace(
        "kind = \"cold_start\"\nspawns = 2",
        "kind = \"soak\"\ntool = \"add_numbers\"\nworkers = 10\nduration = \"10m\"\nleak_floor = \"2MiB/h\"",
    );
    let s = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap();
    let cells = s.cells();
    assert_eq!(cells.len(), 3 * 2 * 3, "3 releases x 2 runtimes x 3 repeats");
    assert!(cells.iter().all(|c| matches!(
        c.workload,
        crate::spec::Workload::Soak { steady_ms: 600_000, leak_floor_bytes_per_hour: 2_097_152, .. }
    )));
}

#[test]
fn noise_defaults_order_and_controls() {
    let d = with_releases(&["1.1.2", "1.1.3", "1.2.1", "1.10.0"]);
    let sweep = |src: String| Scenario::parse_in(Path::new("m.toml"), src, d.path());
    let s = sweep(MATRIX.into()).unwrap();
    assert_eq!((s.repeats, s.order), (3, crate::spec::Order::Random));
    // The first and last release of the range, on every runtime.
    assert_eq!(
        s.controls,
        [
            "mcp-1.1.2-cpython-bookworm",
            "mcp-1.1.2-cpython-trixie",
            "mcp-1.10.0-cpython-bookworm",
            "mcp-1.10.0-cpython-trixie"
        ]
    );
    let s = sweep(MATRIX.replace("api = ", "controls = [\"1.2.1\", \"first\"]\napi = ")).unwrap();
    assert_eq!(
        s.controls,
        [
            "mcp-1.1.2-cpython-bookworm",
            "mcp-1.1.2-cpython-trixie",
            "mcp-1.2.1-cpython-bookworm",
            "mcp-1.2.1-cpython-trixie"
        ]
    );
    let s = sweep(MATRIX.replace("api = ", "controls = []\napi = ")).unwrap();
    assert!(s.controls.is_empty());
    let e = sweep(MATRIX.replace("api = ", "controls = [\"9.9.9\"]\napi = ")).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:9:") && e.contains("\"9.9.9\" is not a version of this matrix"), "{e}");
    let s = sweep(format!("repeats = 1\norder = \"as-written\"\n{MATRIX}")).unwrap();
    assert_eq!((s.repeats, s.order), (1, crate::spec::Order::AsWritten));
    let e = sweep(format!("order = \"shuffled\"\n{MATRIX}")).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:1:9") && e.contains("\"random\" or \"as-written\""), "{e}");
    // A list of servers is not a sweep: once, no controls, unless it names them.
    let s = parse(GOOD).unwrap();
    assert_eq!((s.repeats, s.controls.len()), (1, 0));
    let s = parse(&GOOD.replace("suite = \"weekly\"", "suite = \"weekly\"\ncontrols = [\"mcp\"]")).unwrap();
    assert_eq!(s.controls, ["mcp"]);
    let e =
        parse(&GOOD.replace("suite = \"weekly\"", "suite = \"weekly\"\ncontrols = [\"nope\"]")).unwrap_err();
    assert!(e.to_string().starts_with("scenarios/t.toml:4:") && e.to_string().contains("\"nope\""), "{e}");
    // A reproduction (a [source] or claims) runs three times.
    let s = parse(&GOOD.replace("[placement]", "[source]\nfile = \"x.md\"\n[placement]")).unwrap();
    assert_eq!(s.repeats, 3);
}

#[test]
fn matrix_errors_point_at_the_field() {
    // No release list yet: the error names the lock command, at the `versions` line.
    let empty = tempfile::tempdir().unwrap();
    let e = Scenario::parse_in(Path::new("m.toml"), MATRIX.into(), empty.path()).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:6:"), "{e}");
    assert!(e.contains("benchlab lock python-mcp 1.1.2..1.x"), "{e}");
    // Two runtimes but an id template without {runtime}: ids would collide.
    let d = with_releases(&["1.1.2"]);
    let src = MATRIX.replace("mcp-{version}-{runtime}", "mcp-{version}");
    let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:4:") && e.contains("{runtime}"), "{e}");
    // A bad pick and a bad range.
    let src = MATRIX.replace("latest-patch", "newest");
    let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:7:") && e.contains("unknown pick"), "{e}");
    let src = MATRIX.replace("1.1.2..1.x", "1.1.2..one");
    let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:6:") && e.contains("release range"), "{e}");
    // A range that holds no release.
    let src = MATRIX.replace("1.1.2..1.x", "3.0.0..3.x");
    let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
    assert!(e.contains("no release of mcp"), "{e}");
    // Unknown key in a matrix.
    let src = MATRIX.replace("api = \"lowlevel\"", "apis = \"lowlevel\"");
    let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
    assert!(e.starts_with("m.toml:9:") && e.contains("apis"), "{e}");
}

#[test]
fn matrix_lists_engines_and_placements() {
    let src = r#"
name = "e"
[[matrix]]
id = "mcp-{engine}-{placement}"
family = "python-mcp"
versions = ["2.3.0"]
engines = ["docker", "native"]
placements = ["split", "shared"]
[[workload]]
kind = "cold_start"
spawns = 1
"#;
    let s = Scenario::parse_in(Path::new("e.toml"), src.into(), Path::new("/nonexistent")).unwrap();
    let ids: Vec<&str> = s.servers.iter().map(|x| x.id.get_ref().as_str()).collect();
    assert_eq!(ids, ["mcp-docker-split", "mcp-native-split", "mcp-docker-shared", "mcp-native-shared"]);
    assert_eq!(s.servers[1].engine.as_ref().map(|e| *e.get_ref()), Some(EngineKind::Native));
    assert_eq!(s.servers[2].placement.as_ref().map(|p| *p.get_ref()), Some(PlacementMode::Shared));
}

#[test]
fn the_source_statement_and_the_artifact_fields_are_checked_where_written() {
    let stated = GOOD.replace(
        "[placement]",
        "[source]\nfile = \"000.txt\"\nhardware = { cpu_model = \"AMD EPYC\", cpus = 8 }\npackages = { mcp = \"1.1.2\" }\nprogram = \"seed-000\"\n\n[placement]",
    );
    let s = parse(&stated).unwrap();
    assert_eq!(s.stated.hardware.as_ref().map(|h| h.cpus), Some(8));
    assert_eq!(s.stated.packages["mcp"], "1.1.2");
    assert_eq!(s.stated.program.as_deref(), Some("seed-000"));
    assert_eq!(parse(GOOD).unwrap().stated, SourceStatement::default());
    // An unknown key of [source] is refused at its line and column.
    let e = parse(&stated.replace("program = \"seed-000\"", "programme = \"x\"")).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:8:1: ") && e.contains("programme"), "{e}");
    // The null server has no program, lock or bytecode; `bytecode = "none"` needs a program.
    let null = GOOD.replace("family = \"benchlab-null\"", "family = \"benchlab-null\"\nlock = \"era\"");
    let e = parse(&null).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:11:8: ") && e.contains("null server"), "{e}");
    let nobc = GOOD.replace("version = \"2.3.0\"", "version = \"2.3.0\"\nbytecode = \"none\"");
    let e = parse(&nobc).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:16:12: ") && e.contains("set `program` too"), "{e}");
    let e = parse(&GOOD.replace("version = \"2.3.0\"", "version = \"2.3.0\"\nbytecode = \"some\""))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("scenarios/t.toml:16:12: "), "{e}");
    let ok = GOOD
        .replace("version = \"2.3.0\"", "version = \"2.3.0\"\nprogram = \"seed-001\"\nbytecode = \"none\"");
    let s = parse(&ok).unwrap();
    assert_eq!(s.servers[1].bytecode.as_ref().map(|b| *b.get_ref()), Some(Bytecode::Absent));
}

/// An HTTP null server and a soak workload with `extra` keys after its tool.
fn soak(extra: &str) -> String {
    format!(
        "name = \"s\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n\
         [[workload]]\nkind = \"soak\"\ntool = \"echo\"\n{extra}\n"
    )
}

#[test]
fn a_soak_reads_its_phases_with_defaults_and_refuses_what_does_not_fit() {
    let s = parse(&soak("workers = 4\nduration = \"30m\"")).unwrap();
    let w = &s.cells()[0].workload;
    assert_eq!(
        *w,
        Workload::Soak {
            tool: "echo".into(),
            workers: 4,
            rate: None,
            lifecycle: Default::default(),
            idle_before_ms: 30_000,
            ramp_ms: 30_000,
            steady_ms: 1_800_000,
            idle_after_ms: 30_000,
            interval_ms: 1_000,
            leak_floor_bytes_per_hour: 1 << 20,
            cycles: 0,
            cycle_load_ms: 0,
            cycle_idle_ms: 0,
        }
    );
    assert_eq!(s.cells()[0].id(), "null/soak");
    // The idle phase before counts with the load; a day is allowed with its idle phases.
    assert_eq!(w.load_time_ms(), 30_000 + 30_000 + 1_800_000);
    let day = parse(&soak(
        "rate = 50\nconnections = 4\nduration = \"24h\"\ninterval = \"60s\"\nleak_floor = \"512KiB/h\"",
    ))
    .unwrap();
    let w = &day.cells()[0].workload;
    assert!(
        matches!(w, Workload::Soak { rate: Some(50), workers: 4, leak_floor_bytes_per_hour: 524_288, .. }),
        "{w:?}"
    );
    assert!(w.time_limit(&Default::default()) > std::time::Duration::from_secs(24 * 3600));
    // Each mistake at its key: line 8 is the first key after `tool`.
    for (extra, says) in [
        ("workers = [1, 2]\nduration = \"1m\"", "one count of `workers`"),
        ("workers = 2\nduration = \"5s\"", "at least \"10s\""),
        ("workers = 2\nduration = \"1m\"\ninterval = \"30s\"", "a tenth of `duration`"),
        ("workers = 2\nduration = \"1m\"\nleak_floor = \"1MiB\"", "memory per hour"),
        ("workers = 2\nduration = \"1m\"\nwarmup = \"1s\"", "`warmup` does not belong to a soak"),
        ("rate = 10\nworkers = 2\nduration = \"1m\"", "`workers` does not belong to a soak"),
        ("workers = 2\nduration = \"1m\"\nramp = \"soon\"", "`ramp`"),
    ] {
        let e = parse(&soak(extra)).unwrap_err().to_string();
        assert!(e.contains(says), "{extra}: {e}");
        assert!(e.starts_with("scenarios/t.toml:"), "{e}");
    }
    let e = parse(&soak("workers = 2")).unwrap_err().to_string();
    assert!(e.contains("needs `duration`"), "{e}");
    // The soak's own keys belong to no other workload.
    let e = parse(&GOOD.replace("calls = 100", "calls = 100\nramp = \"1s\"")).unwrap_err().to_string();
    assert!(e.contains("`ramp` does not belong to a serial_calls workload"), "{e}");
}

#[test]
fn a_soaks_cycles_take_their_idle_phase_from_idle_after_and_refuse_what_does_not_fit() {
    let cycles_of = |extra: &str| match parse(&soak(&format!("workers = 4\nduration = \"1m\"\n{extra}")))
        .unwrap()
        .cells()[0]
        .workload
    {
        Workload::Soak { cycles, cycle_load_ms, cycle_idle_ms, .. } => (cycles, cycle_load_ms, cycle_idle_ms),
        ref w => panic!("{w:?}"),
    };
    assert_eq!(cycles_of(""), (0, 0, 0));
    assert_eq!(cycles_of("cycles = 5\nidle_after = \"2m\""), (5, 60_000, 120_000));
    assert_eq!(cycles_of("cycles = 3\ncycle_load = \"30s\"\ncycle_idle = \"90s\""), (3, 30_000, 90_000));
    // The cycles count in the time limit and the estimate.
    let w = &parse(&soak(
        "workers = 4\nduration = \"1m\"\ncycles = 2\ncycle_load = \"30s\"\ncycle_idle = \"90s\"",
    ))
    .unwrap()
    .cells()[0]
        .workload;
    assert_eq!(w.cycles_ms(), 240_000);
    let plain = &parse(&soak("workers = 4\nduration = \"1m\"")).unwrap().cells()[0].workload;
    assert_eq!(
        w.time_limit(&Default::default()) - plain.time_limit(&Default::default()),
        std::time::Duration::from_millis(264_000)
    );
    for (extra, says) in [
        ("cycles = 0", "from 1 to 1000"),
        ("cycle_load = \"30s\"", "without `cycles`"),
        ("cycles = 2\ncycle_load = \"0s\"", "at least \"1s\""),
        ("cycles = 2\ncycle_idle = \"later\"", "`cycle_idle`"),
    ] {
        let e = parse(&soak(&format!("workers = 2\nduration = \"1m\"\n{extra}"))).unwrap_err().to_string();
        assert!(e.contains(says), "{extra}: {e}");
    }
    let e = parse(&GOOD.replace("calls = 100", "calls = 100\ncycles = 2")).unwrap_err().to_string();
    assert!(e.contains("`cycles` does not belong to a serial_calls workload"), "{e}");
}

#[test]
fn a_mix_and_iterations_parse_and_bad_ones_are_refused_at_their_key() {
    let head = "name = \"m\"\nsuite = \"weekly\"\n[[server]]\nid = \"h\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n[[workload]]\nkind = \"concurrency\"\nworkers = 2\nduration = \"1s\"\n";
    let s =
        parse(&format!("{head}lifecycle = \"iteration\"\nmix = {{ echo = 2, add_numbers = 1 }}\n")).unwrap();
    match &s.workloads[0] {
        Workload::Concurrency { tool, mix, session_calls, lifecycle, .. } => {
            assert_eq!(tool, "mix");
            assert_eq!(mix.len(), 2);
            assert_eq!(*session_calls, 5, "the default");
            assert_eq!(*lifecycle, crate::spec::Lifecycle::Iteration);
        }
        w => panic!("{w:?}"),
    }
    let err = |tail: &str| parse(&format!("{head}{tail}")).expect_err("refused").to_string();
    assert!(err("tool = \"echo\"\nmix = { echo = 1 }\n").contains("`tool` and `mix` exclude each other"));
    assert!(err("mix = { echo = 0 }\n").contains("a weight from 1 to 1000"));
    assert!(err("mix = { nope = 1 }\n").contains("has no tool \"nope\""));
    assert!(err("tool = \"echo\"\nsession_calls = 3\n")
        .contains("`session_calls` belongs only to a workload with lifecycle = \"iteration\""));
    assert!(err("tool = \"echo\"\nlifecycle = \"iteration\"\nsession_calls = 0\n")
        .contains("`session_calls` is from 1 to 10000"));
    let e = err("tool = \"echo\"\nsession_calls = 3\n");
    assert!(e.contains("m.toml:") || e.contains("t.toml:"), "{e}");
}

#[test]
fn workers_are_for_http_servers_with_a_multi_worker_mode() {
    let scenario = |server: &str| {
        format!("name = \"w\"\n[[server]]\nid = \"s\"\n{server}\n[[workload]]\nkind = \"concurrency\"\ntool = \"echo\"\nworkers = 2\nduration = \"1s\"\n")
    };
    let null = "family = \"benchlab-null\"\ntransport = \"streamable-http\"";
    assert!(parse(&scenario(&format!("{null}\nworkers = 4"))).is_ok());
    let err = |server: &str| parse(&scenario(server)).expect_err("refused").to_string();
    assert!(err(&format!("{null}\nworkers = 0")).contains("`workers` is from 1 to 64"));
    assert!(err(&format!("{null}\nsession = \"stateful\"\nworkers = 2"))
        .contains("several workers serve stateless"));
    // Whether an SDK's server has workers is its recipe's to say: the scenario takes the key.
    assert!(parse(&scenario(
        "family = \"python-mcp\"\nversion = \"1.30.0\"\ntransport = \"streamable-http\"\nworkers = 2"
    ))
    .is_ok());
    assert!(err("family = \"benchlab-null\"\nworkers = 2").contains("several workers need an HTTP server"));
}

#[test]
fn start_up_and_call_limits_are_at_least_one_and_refused_at_their_key() {
    let with = |v: &str| {
        GOOD.replace("family = \"benchlab-null\"", &format!("family = \"benchlab-null\"\nstartup_ms = {v}"))
    };
    let s = parse(&with("2500")).unwrap();
    assert_eq!(s.servers[0].startup_ms.as_ref().map(|v| *v.get_ref()), Some(2500));
    assert_eq!(s.servers[1].startup_ms, None);
    let e = parse(&with("0")).unwrap_err().to_string();
    assert!(e.starts_with("scenarios/t.toml:11:14: "), "{e}");
    assert!(e.contains("server \"null\": `startup_ms` is a limit in milliseconds, at least 1"), "{e}");
    // The scenario's own limits too.
    for key in ["startup_ms", "call_ms"] {
        let zero = GOOD.replace("[placement]", &format!("[timeouts]\n{key} = 0\n[placement]"));
        let e = parse(&zero).unwrap_err().to_string();
        assert!(e.starts_with(&format!("scenarios/t.toml:5:{}: ", key.len() + 4)), "{e}");
        assert!(e.contains(&format!("[timeouts] `{key}` is a limit in milliseconds, at least 1")), "{e}");
    }
    let ok = GOOD.replace("[placement]", "[timeouts]\nstartup_ms = 45000\ncall_ms = 2000\n[placement]");
    let t = parse(&ok).unwrap().timeouts;
    assert_eq!((t.startup_ms, t.call_ms), (45_000, 2_000));
}
