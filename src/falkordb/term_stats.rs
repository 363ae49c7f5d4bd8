//! Document frequencies observed in the fulltext indices, per graph, index and term:
//! the statistics the lexical ranking (`graph::search::lexical`) reuses so that a
//! query does not walk every match of its commonest terms each time.
//!
//! An observation is only a statistic: it weighs a term (its idf), and tells which
//! terms are common enough to be read only where they meet the rarer ones. It never
//! decides which records match: the ranking checks that its pool is exact for the
//! weights it used, and reads the whole postings when it is not. An observation
//! stands for [`TermStats::TTL`], and is dropped with its graph.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A term's matches counted in one index at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Observed {
    /// The records matching the term.
    pub df: u64,
    /// The records the index held then.
    pub docs: u64,
    at: Instant,
}

/// The observations of one handle (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct TermStats {
    /// graph → (index label, term) → observation.
    graphs: Mutex<HashMap<String, GraphTerms>>,
}

/// One graph's observations: (index label, term) → observation.
type GraphTerms = HashMap<(&'static str, String), Observed>;

impl TermStats {
    /// How long an observation stands for a fresh count.
    pub(crate) const TTL: Duration = Duration::from_secs(120);
    /// At most this many observations per graph: a fuller graph drops its expired
    /// ones, then all of them.
    const CAP: usize = 8192;

    /// `term`'s observation in `label`'s index of `graph`, if one younger than
    /// [`TTL`](Self::TTL) is held.
    pub(crate) fn get(&self, graph: &str, label: &'static str, term: &str) -> Option<Observed> {
        let graphs = self.graphs.lock().expect("term statistics poisoned");
        graphs
            .get(graph)?
            .get(&(label, term.to_owned()))
            .filter(|o| o.at.elapsed() < Self::TTL)
            .copied()
    }

    /// Records that `term` matched `df` of the `docs` records in `label`'s index of
    /// `graph`, now.
    pub(crate) fn put(&self, graph: &str, label: &'static str, term: &str, df: u64, docs: u64) {
        let mut graphs = self.graphs.lock().expect("term statistics poisoned");
        let terms = graphs.entry(graph.to_owned()).or_default();
        if terms.len() >= Self::CAP {
            terms.retain(|_, o| o.at.elapsed() < Self::TTL);
            if terms.len() >= Self::CAP {
                terms.clear();
            }
        }
        let at = Instant::now();
        terms.insert((label, term.to_owned()), Observed { df, docs, at });
    }

    /// Drops every observation of `graph` (deleted).
    pub(crate) fn forget(&self, graph: &str) {
        self.graphs
            .lock()
            .expect("term statistics poisoned")
            .remove(graph);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_is_kept_per_graph_index_and_term_and_forgotten_with_its_graph() {
        let s = TermStats::default();
        s.put("g", "RELATES_TO", "noah", 7, 100);
        let o = s.get("g", "RELATES_TO", "noah").unwrap();
        assert_eq!((o.df, o.docs), (7, 100));
        assert_eq!(s.get("g", "Entity", "noah"), None);
        assert_eq!(s.get("h", "RELATES_TO", "noah"), None);
        assert_eq!(s.get("g", "RELATES_TO", "pottery"), None);
        s.put("g", "RELATES_TO", "noah", 9, 120);
        assert_eq!(s.get("g", "RELATES_TO", "noah").unwrap().df, 9);
        s.forget("g");
        assert_eq!(s.get("g", "RELATES_TO", "noah"), None);
    }

    #[test]
    fn a_full_graph_makes_room() {
        let s = TermStats::default();
        for i in 0..TermStats::CAP + 1 {
            s.put("g", "Entity", &format!("t{i}"), 1, 10);
        }
        let held = s.graphs.lock().unwrap()["g"].len();
        assert!(held <= TermStats::CAP, "{held}");
        assert!(
            s.get("g", "Entity", &format!("t{}", TermStats::CAP))
                .is_some()
        );
    }
}
