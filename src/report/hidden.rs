//! What a cell's server kept out of its own figures, in words for the reports: memory the
//! container's cgroup held outside the server's process tree (`metrics.memory.outside_tree`) and
//! processes its spawns left behind (`observed.left_behind`). Says which figure the reports use.
//! Pure: a function of the records.

use crate::record::Record;

/// The sentence that says which memory figure the reports show, and what stands beside it.
pub const FIGURE_NOTE: &str = "Memory figures (RSS) are the server's process tree: VmRSS summed over \
     the server and its descendants, from /proc in its container. The container's cgroup is read at \
     the same points (v1 memory.usage_in_bytes and memory.max_usage_in_bytes); a cell whose cgroup \
     held more anonymous memory outside the tree than the threshold is listed here, and so is a cell \
     whose spawns left processes behind (the shim killed them before the next spawn): their tree \
     figures understate the server.";

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// One line per cell with a flag; None when no record carries a cgroup reading (records written
/// before the lab read one), so reports of those stay as they were.
pub fn lines(records: &[Record]) -> Option<Vec<(String, String)>> {
    let read = records.iter().any(|r| {
        let m = &r.metrics.memory;
        m.cgroup_after_initialize.is_some() || m.cgroup_end.is_some() || r.observed.left_behind.is_some()
    });
    if !read {
        return None;
    }
    let mut out = Vec::new();
    for r in records {
        let m = &r.metrics.memory;
        let mut parts = Vec::new();
        if let Some(o) = &m.outside_tree {
            let (tree, cgroup) = match o.at.as_str() {
                "end" => (m.end.as_ref(), m.cgroup_end.as_ref()),
                _ => (m.after_initialize.as_ref(), m.cgroup_after_initialize.as_ref()),
            };
            let at = if o.at == "end" { "at the end" } else { "after initialize" };
            parts.push(format!(
                "memory outside the server's process tree: {} {at} (threshold {}; cgroup usage {}, tree RSS {})",
                mib(o.bytes),
                mib(o.threshold_bytes),
                cgroup.map_or("—".into(), |c| mib(c.usage_bytes)),
                tree.map_or("—".into(), |t| mib(t.rss_bytes)),
            ));
        }
        if let Some(l) = &r.observed.left_behind {
            parts.push(format!(
                "{} spawn(s) left {} process(es) behind, {} RSS, killed before the next spawn",
                l.spawns,
                l.processes,
                mib(l.rss_bytes)
            ));
        }
        if !parts.is_empty() {
            out.push((r.cell.id.clone(), parts.join("; ")));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::record::{LeftBehind, MemoryMetrics};
    use crate::spec::CgroupMemory;

    #[test]
    fn flags_are_listed_and_old_records_say_nothing() {
        let plain = sample_record("a");
        assert_eq!(lines(std::slice::from_ref(&plain)), None);
        let mut hidden = sample_record("b");
        let cgroup = CgroupMemory {
            usage_bytes: 200 << 20,
            peak_bytes: Some(210 << 20),
            anon_bytes: Some(190 << 20),
            outside_tree_bytes: Some(150 << 20),
        };
        hidden.metrics.memory.cgroup_end = Some(cgroup);
        hidden.metrics.memory.outside_tree = MemoryMetrics::outside_tree_of(None, Some(&cgroup));
        hidden.observed.left_behind = Some(LeftBehind { spawns: 1, processes: 2, rss_bytes: 150 << 20 });
        let got = lines(&[plain, hidden.clone()]).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, hidden.cell.id);
        assert!(
            got[0].1.contains("memory outside the server's process tree: 150.0 MiB at the end"),
            "{got:?}"
        );
        assert!(got[0].1.contains("1 spawn(s) left 2 process(es) behind, 150.0 MiB RSS"), "{got:?}");
        // Read, nothing flagged: the section is there (it says which figure), with no line.
        hidden.metrics.memory.outside_tree = None;
        hidden.observed.left_behind = None;
        assert_eq!(lines(&[hidden]), Some(Vec::new()));
    }
}
