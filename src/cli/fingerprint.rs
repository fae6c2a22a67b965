//! `benchlab fingerprint`: measures this host's speed fingerprint on two CPUs and prints it as a
//! table or JSON. The probes and their intervals live in `crate::host::fingerprint`; this file
//! only chooses the CPUs and renders.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::exit::{Exit, OK};
use crate::host::fingerprint::{self, Fingerprint};
use crate::placement::{available_cpus, choose, format_cpu_list, parse_cpu_list};
use crate::spec::PlacementSpec;

#[derive(Debug, clap::Args)]
pub struct FingerprintArgs {
    /// The CPUs to measure on, `A,B`: A runs the CPU loop, the memory copy, the spawns and one
    /// end of the pipe ping-pong, B the other end; `A` alone puts both ends on A. Default: where
    /// a run puts a split cell's server (A, the last CPU) and driver (B).
    #[arg(long, value_name = "A,B")]
    cpus: Option<String>,
    /// Print the fingerprint as JSON, as records store it (host_check.fingerprint).
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: FingerprintArgs) -> Result<i32, Exit> {
    let available = available_cpus();
    let (a, b) = match &args.cpus {
        Some(s) => parse_cpus(s, &available)?,
        None => default_cpus(&available)?,
    };
    if !args.json {
        eprintln!("measuring on CPUs {a},{b} (about a second)…");
    }
    let f = fingerprint::measure(a, b);
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&f).expect("a fingerprint serialises"))
    } else {
        render(&f)
    };
    // A closed pipe (`| head`) is the reader's choice, not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(OK)
}

/// `A,B` or `A`, each among the CPUs this process may use (the order matters: A is the server's).
fn parse_cpus(s: &str, available: &[u32]) -> Result<(u32, u32), Exit> {
    let bad = |why: String| Exit::input(format!("--cpus {s}: {why}"));
    let cpus: Vec<u32> = s
        .split(',')
        .map(|c| c.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad("give one CPU or two, as A,B (e.g. 1,0)".into()))?;
    if let Some(c) = cpus.iter().find(|c| !available.contains(c)) {
        return Err(bad(format!(
            "CPU {c} is not among this process's CPUs ({})",
            format_cpu_list(available)
        )));
    }
    match cpus.as_slice() {
        [a] => Ok((*a, *a)),
        [a, b] => Ok((*a, *b)),
        _ => Err(bad("give one CPU or two, as A,B (e.g. 1,0)".into())),
    }
}

/// Where a run puts a split cell: the server's first CPU and the driver's; one CPU for both when
/// the host has a single one.
fn default_cpus(available: &[u32]) -> Result<(u32, u32), Exit> {
    let first = |set: &str| parse_cpu_list(set).ok().and_then(|v| v.first().copied());
    if let Ok(p) = choose(&PlacementSpec::default(), available) {
        if let (Some(a), Some(b)) = (first(&p.server_cpus), first(&p.driver_cpus)) {
            return Ok((a, b));
        }
    }
    let last = *available.last().ok_or_else(|| Exit::environment("this process may run on no CPU"))?;
    Ok((last, last))
}

/// The table of probes, then the one-line summary.
fn render(f: &Fingerprint) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["probe", "median", "95 % interval", "rounds", "what"]);
    for p in &f.probes {
        t.add_row([
            p.name.clone(),
            fingerprint::probe_text(p),
            format!("{} – {}", fingerprint::three_digits(p.lower), fingerprint::three_digits(p.upper)),
            p.repetitions.to_string(),
            what(&p.name, &f.cpus),
        ]);
    }
    format!("host speed fingerprint, CPUs {}, {}\n{t}\n{}\n", f.cpus, f.measured_at, fingerprint::summary(f))
}

fn what(name: &str, cpus: &str) -> String {
    let a = cpus.split(',').next().unwrap_or(cpus);
    match name {
        fingerprint::CPU_LOOP => format!("integer loop on CPU {a}, CPU ns per iteration"),
        fingerprint::MEMORY_BANDWIDTH => {
            format!("{} MiB copy on CPU {a}, GB/s of CPU time", fingerprint::MEMORY_BYTES >> 20)
        }
        fingerprint::PIPE_PINGPONG => format!("1-byte pipe round trip, CPUs {cpus} (never counted)"),
        fingerprint::SPAWN => format!("fork+exec+wait of /bin/true from CPU {a}, CPU ms"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_one_or_two_of_the_available() {
        let avail = [0, 1, 2, 3];
        assert_eq!(parse_cpus("3,0", &avail).ok(), Some((3, 0)));
        assert_eq!(parse_cpus("2", &avail).ok(), Some((2, 2)));
        assert!(parse_cpus("7,0", &avail).err().unwrap().message.contains("CPU 7 is not among"));
        assert!(parse_cpus("0-1", &avail).is_err());
        assert!(parse_cpus("0,1,2", &avail).is_err());
        assert_eq!(default_cpus(&[0, 1]).ok(), Some((1, 0)));
        assert_eq!(default_cpus(&[5]).ok(), Some((5, 5)));
    }
}
