//! The order a run measures its cells in. `random` (the default): the cells of each round of
//! repeats (every cell once, then every cell again: A B C A B C…) in a seeded permutation, so a
//! drift of the host spreads across versions instead of lining up with them; `as-written`: the
//! scenario's order (server by server, workload by workload, repeats together). A sweep's A/A
//! control servers are measured again at the start, in the middle and at the end of the run,
//! whatever the order. Pure: the same cells, order and seed give the same arrangement.

use super::plan::PlannedCell;
use crate::spec::{ControlAt, Order, Schedule};

/// A seed for a new run's permutation: the clock and the process id, mixed. Printed by
/// `plan`/`run` and kept in every record, so `--order-seed` gives the same order back.
pub fn fresh_seed() -> u32 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mixed = (nanos ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) as u32
}

/// The round a cell belongs to: its repeat's index (0 when the cell is not repeated).
fn round(c: &PlannedCell) -> u32 {
    c.repeat.map_or(0, |r| r.index)
}

/// Arranges a run's planned cells (in the scenario's order) and numbers them: the permutation of
/// `order` with `seed`, and for every cell of a control server in its first round, one more cell
/// at the start, one in the middle and one at the end of the run (not repeats: their records say
/// `schedule.control`). Every cell's `schedule` is set.
pub fn arrange(cells: Vec<PlannedCell>, controls: &[String], order: Order, seed: u32) -> Vec<PlannedCell> {
    let control_copies = |at: ControlAt| -> Vec<PlannedCell> {
        let mut v: Vec<PlannedCell> = cells
            .iter()
            .filter(|c| round(c) == 0 && controls.contains(&c.server_id))
            .map(|c| PlannedCell {
                repeat: None,
                schedule: Some(Schedule { order, seed: None, position: 0, of: 0, control: Some(at) }),
                ..c.clone()
            })
            .collect();
        if order == Order::Random {
            crate::stats::seeded_shuffle(&mut v, mix(seed, 1_000 + at as u64));
        }
        v
    };
    let (start, middle, end) =
        (control_copies(ControlAt::Start), control_copies(ControlAt::Middle), control_copies(ControlAt::End));
    let base: Vec<PlannedCell> = match order {
        Order::AsWritten => cells,
        Order::Random => {
            let rounds = cells.iter().map(round).max().map_or(0, |r| r + 1);
            let mut out = Vec::with_capacity(cells.len());
            for r in 0..rounds {
                let mut this: Vec<PlannedCell> = cells.iter().filter(|c| round(c) == r).cloned().collect();
                crate::stats::seeded_shuffle(&mut this, mix(seed, u64::from(r)));
                out.extend(this);
            }
            out
        }
    };
    let half = base.len() / 2;
    let mut base = base.into_iter();
    let mut all: Vec<PlannedCell> = start;
    all.extend(base.by_ref().take(half));
    all.extend(middle);
    all.extend(base);
    all.extend(end);
    let of = all.len() as u32;
    for (i, c) in all.iter_mut().enumerate() {
        let control = c.schedule.as_ref().and_then(|s| s.control);
        c.schedule = Some(Schedule {
            order,
            seed: (order == Order::Random).then_some(seed),
            position: i as u32,
            of,
            control,
        });
    }
    all
}

/// The shuffle seed of one part of the arrangement.
fn mix(seed: u32, part: u64) -> u64 {
    (u64::from(seed) << 20) ^ part.wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// The seed a resumed run keeps: the one its earlier records name.
pub fn seed_of(records: &[crate::record::Record]) -> Option<u32> {
    records.iter().find_map(|r| r.schedule.as_ref().and_then(|s| s.seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrate::tests::planned;

    fn ids(cells: &[PlannedCell]) -> Vec<String> {
        cells
            .iter()
            .map(|c| {
                let r = c.repeat.map_or(String::new(), |r| format!("#{}", r.index));
                let k = c
                    .schedule
                    .as_ref()
                    .and_then(|s| s.control)
                    .map_or(String::new(), |k| format!("@{}", k.as_str()));
                format!("{}{r}{k}", c.server_id)
            })
            .collect()
    }

    #[test]
    fn random_order_is_round_robin_seeded_and_a_permutation() {
        let cells = planned(&["a", "b", "c", "d"], 3);
        let one = arrange(cells.clone(), &[], Order::Random, 42);
        let two = arrange(cells.clone(), &[], Order::Random, 42);
        assert_eq!(ids(&one), ids(&two), "the same seed gives the same order");
        assert_eq!(one.len(), 12);
        // Round-robin: every server once in each round of four.
        for (r, chunk) in one.chunks(4).enumerate() {
            let mut s: Vec<&str> = chunk.iter().map(|c| c.server_id.as_str()).collect();
            s.sort_unstable();
            assert_eq!(s, ["a", "b", "c", "d"]);
            assert!(chunk.iter().all(|c| c.repeat.unwrap().index == r as u32));
        }
        let other = arrange(cells.clone(), &[], Order::Random, 43);
        assert_ne!(ids(&one), ids(&other), "another seed, another order");
        let as_written = arrange(cells, &[], Order::AsWritten, 42);
        assert_eq!(ids(&as_written)[..3], ["a#0", "a#1", "a#2"]);
        for (i, c) in one.iter().enumerate() {
            let s = c.schedule.as_ref().unwrap();
            assert_eq!((s.position, s.of, s.seed, s.control), (i as u32, 12, Some(42), None));
        }
        assert!(as_written.iter().all(|c| c.schedule.as_ref().unwrap().seed.is_none()));
    }

    #[test]
    fn controls_come_at_the_start_middle_and_end() {
        let cells = planned(&["v1", "v2", "v3", "v4"], 2);
        let all = arrange(cells, &["v1".to_string(), "v4".to_string()], Order::Random, 9);
        assert_eq!(all.len(), 8 + 6);
        let at = |k: ControlAt| -> Vec<usize> {
            all.iter()
                .enumerate()
                .filter(|(_, c)| c.schedule.as_ref().unwrap().control == Some(k))
                .map(|(i, _)| i)
                .collect()
        };
        assert_eq!(at(ControlAt::Start), [0, 1]);
        assert_eq!(at(ControlAt::Middle), [6, 7]);
        assert_eq!(at(ControlAt::End), [12, 13]);
        for i in at(ControlAt::Start).into_iter().chain(at(ControlAt::End)) {
            assert!(all[i].repeat.is_none() && ["v1", "v4"].contains(&all[i].server_id.as_str()));
        }
    }
}
