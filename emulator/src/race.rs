//! The race check of a launch: two CPEs writing overlapping main memory.

use crate::cpe::Block;
use crate::machine::{CpeResult, Violation};

/// The first pair of CPEs whose main-memory writes overlap, as a violation.
pub(crate) fn find_race(kernel: &str, results: &[CpeResult], regions: &[Block]) -> Option<Violation> {
    let mut writes: Vec<(usize, usize, usize)> = results
        .iter()
        .flat_map(|r| r.writes.iter().map(move |&(s, e)| (s, e, r.id)))
        .collect();
    // Each CPE's list is sorted (see `Cpe::leave`): a stable sort merges the runs.
    writes.sort();
    // The furthest-reaching write so far as (end, cpe), and the furthest one of any other CPE.
    let mut best: Option<(usize, usize)> = None;
    let mut second: Option<(usize, usize)> = None;
    for &(s, e, cpe) in &writes {
        let other = match best {
            Some((_, c)) if c == cpe => second,
            b => b,
        };
        if let Some((end, c)) = other.filter(|&(end, _)| s < end) {
            let hi = end.min(e);
            let place = match regions.iter().find(|r| r.contains(s)) {
                Some(r) => format!("{} bytes [{}, {})", r.name, s - r.base, hi - r.base),
                None => format!("main memory [{s:#x}, {hi:#x})"),
            };
            return Some(Violation {
                kernel: kernel.to_string(),
                cpes: vec![c.min(cpe), c.max(cpe)],
                message: format!("both write {place} in one launch"),
            });
        }
        match best {
            Some((be, bc)) if bc == cpe => best = Some((be.max(e), bc)),
            Some((be, _)) if e > be => {
                second = best;
                best = Some((e, cpe));
            }
            Some(_) if second.is_none_or(|(se, _)| e > se) => second = Some((e, cpe)),
            Some(_) => {}
            None => best = Some((e, cpe)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::KernelCounters;
    use crate::replay::Log;

    fn result(id: usize, writes: &[(usize, usize)]) -> CpeResult {
        CpeResult {
            id,
            writes: writes.to_vec(),
            counters: KernelCounters::default(),
            log: Log::default(),
            violation: None,
        }
    }

    fn arena() -> Vec<Block> {
        vec![Block {
            base: 1000,
            bytes: 1000,
            name: "arena".into(),
        }]
    }

    #[test]
    fn disjoint_writes_are_no_race() {
        let r = [result(0, &[(1000, 1010), (1010, 1020)]), result(1, &[(1020, 1040)])];
        assert_eq!(find_race("k", &r, &arena()), None);
    }

    #[test]
    fn one_cpe_may_rewrite_its_own_bytes() {
        let r = [result(3, &[(1000, 1100), (1050, 1060)]), result(4, &[(1100, 1200)])];
        assert_eq!(find_race("k", &r, &arena()), None);
    }

    #[test]
    fn overlap_of_two_cpes_is_reported_with_both() {
        let r = [result(0, &[(1000, 1010)]), result(5, &[(1008, 1020)])];
        let v = find_race("relu", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![0, 5]);
        assert_eq!(
            v.to_string(),
            "kernel 'relu' on CPEs 0 and 5: both write arena bytes [8, 10) in one launch"
        );
    }

    #[test]
    fn overlap_hidden_behind_a_longer_write_of_the_same_cpe_is_found() {
        // CPE 1's long write covers CPE 2's, and CPE 1 writes again later: the race is
        // between CPE 2's write and CPE 1's first one.
        let r = [result(1, &[(1000, 1100), (1010, 1020)]), result(2, &[(1005, 1008)])];
        let v = find_race("k", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![1, 2]);
    }

    #[test]
    fn overlap_with_the_second_furthest_cpe_is_found() {
        // CPE 0 reaches furthest; CPE 1 reaches second; a later write of CPE 0 overlaps CPE 1.
        let r = [result(0, &[(1000, 1200), (1050, 1060)]), result(1, &[(1001, 1100)])];
        let v = find_race("k", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![0, 1]);
    }
}
