//! The rerankers: pure functions over the methods' candidate lists (the database work
//! they need — similarities, distances, mention counts — is done beforehand, in one
//! statement each, by [`methods`](super::methods)).
//!
//! * **RRF**: each candidate scores Σ w / (rank + 1) over the lists it is in
//!   (rank from 0, Graphiti's `rank_const = 1`; `w` is the list's weight: the
//!   scope's [`fulltext_weight`](super::ScopeConfig::fulltext_weight) for the fulltext
//!   list, 1 for the others, so by default Graphiti's unweighted sum). Ties keep the order of first
//!   appearance, reading the lists rank by rank in method order (fulltext, vector,
//!   breadth-first). When only one method found anything, there is nothing to fuse:
//!   its order and its own scores stand (cosine similarity for vector, the fulltext
//!   score, 1 / hops for breadth-first).
//! * **MMR**: greedy maximal marginal relevance over the best 2 × limit of
//!   the RRF order. Repeatedly picks the
//!   candidate maximising λ · sim(query, c) − (1 − λ) · max sim(c, s) over those already
//!   picked (0 when none is), and scores it with that value. Graphiti's is a single
//!   non-greedy pass that penalises each candidate by its nearest *other* candidate,
//!   so two near-duplicates both sink; greedy MMR keeps the better one.
//! * **Node distance**: RRF order, then by hop distance from the
//!   center entity, over `RELATES_TO` in either direction up to the scope's
//!   `bfs_max_depth`: score 1 / (1 + hops), 0 when farther or unreachable. An entity's
//!   distance is its own (the center itself is 0); a fact's is the nearer of its two
//!   endpoints (a fact touching the center is 0). Graphiti's version only ever tells
//!   "adjacent" from "not", and on FalkorDB it reads its rows wrongly and returns plain
//!   RRF order.
//! * **Episode mentions**: RRF order, then by a count, most first:
//!   `MENTIONS` links of an entity, supporting episodes of a fact. The score is the
//!   count.
//! * **Cross-encoder**: RRF order, cut to 2 × limit, then by the
//!   [`Reranker`](crate::llm::Reranker)'s score of each candidate's text.
//!
//! Every ordering is stable: equal scores keep the order they came in. The minimum
//! score and the limit are applied last.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::results::Hit;

/// Reciprocal rank fusion of `lists`, each with its weight (see the module docs).
pub(crate) fn rrf<T: Hit>(lists: Vec<(Vec<T>, f64)>) -> Vec<T> {
    let (mut lists, weights): (Vec<Vec<T>>, Vec<f64>) =
        lists.into_iter().filter(|(l, _)| !l.is_empty()).unzip();
    if lists.len() <= 1 {
        // One list: nothing to fuse; its order and the method's own scores stand.
        return lists.pop().unwrap_or_default();
    }
    let mut slot: HashMap<Uuid, usize> = HashMap::new();
    let mut fused: Vec<(T, f64)> = Vec::new();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut lists: Vec<Vec<Option<T>>> = lists
        .into_iter()
        .map(|l| l.into_iter().map(Some).collect())
        .collect();
    for rank in 0..longest {
        for (list, weight) in lists.iter_mut().zip(&weights) {
            let Some(hit) = list.get_mut(rank).and_then(Option::take) else {
                continue;
            };
            let add = weight / (rank as f64 + 1.0);
            match slot.get(&hit.uuid()) {
                Some(&i) => fused[i].1 += add,
                None => {
                    slot.insert(hit.uuid(), fused.len());
                    fused.push((hit, add));
                }
            }
        }
    }
    let mut out: Vec<T> = fused
        .into_iter()
        .map(|(mut h, s)| {
            h.set_score(s);
            h
        })
        .collect();
    sort_desc(&mut out);
    out
}

/// Stable sort by score, highest first.
fn sort_desc<T: Hit>(hits: &mut [T]) {
    hits.sort_by(|a, b| b.score().total_cmp(&a.score()));
}

/// Greedy MMR over `candidates` (see the module docs). `sims` gives, per candidate,
/// its similarity to the query and to the other candidates; a candidate missing
/// there counts as similarity 0.
pub(crate) fn mmr<T: Hit>(
    candidates: Vec<T>,
    sims: &BTreeMap<Uuid, (f64, BTreeMap<Uuid, f64>)>,
    lambda: f64,
) -> Vec<T> {
    let mut left: Vec<T> = candidates;
    let mut picked: Vec<T> = Vec::with_capacity(left.len());
    let qsim = |u: &Uuid| sims.get(u).map_or(0.0, |s| s.0);
    let pair = |a: &Uuid, b: &Uuid| sims.get(a).and_then(|s| s.1.get(b).copied()).unwrap_or(0.0);
    while !left.is_empty() {
        let mut best: Option<(usize, f64)> = None;
        for (i, c) in left.iter().enumerate() {
            let u = c.uuid();
            let redundancy = picked
                .iter()
                .map(|p| pair(&u, &p.uuid()))
                .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))))
                .unwrap_or(0.0);
            let value = lambda * qsim(&u) - (1.0 - lambda) * redundancy;
            if best.is_none_or(|(_, b)| value > b) {
                best = Some((i, value));
            }
        }
        let (i, value) = best.expect("left is not empty");
        let mut hit = left.remove(i);
        hit.set_score(value);
        picked.push(hit);
    }
    picked
}

/// Reorders `hits` (already in RRF order) by hop distance: `distance` gives a hit's
/// hops, or `None` when it is beyond reach. Score 1 / (1 + hops), 0 when unreachable.
pub(crate) fn by_distance<T: Hit>(
    mut hits: Vec<T>,
    distance: impl Fn(&T) -> Option<u32>,
) -> Vec<T> {
    for h in hits.iter_mut() {
        let s = distance(h).map_or(0.0, |d| 1.0 / (1.0 + f64::from(d)));
        h.set_score(s);
    }
    sort_desc(&mut hits);
    hits
}

/// Reorders `hits` (already in RRF order) by `count`, most first; the score is the count.
pub(crate) fn by_count<T: Hit>(mut hits: Vec<T>, count: impl Fn(&T) -> u64) -> Vec<T> {
    for h in hits.iter_mut() {
        let c = count(h) as f64;
        h.set_score(c);
    }
    sort_desc(&mut hits);
    hits
}

/// Reorders `hits` by `scores` (one per hit, in order), highest first.
pub(crate) fn by_scores<T: Hit>(mut hits: Vec<T>, scores: &[f64]) -> Vec<T> {
    for (h, s) in hits.iter_mut().zip(scores) {
        h.set_score(*s);
    }
    sort_desc(&mut hits);
    hits
}

/// Drops hits scoring below `min_score` and keeps the first `limit`.
pub(crate) fn finish<T: Hit>(mut hits: Vec<T>, min_score: f64, limit: usize) -> Vec<T> {
    hits.retain(|h| h.score() >= min_score);
    hits.truncate(limit);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug)]
    struct H(Uuid, f64);
    impl Hit for H {
        fn uuid(&self) -> Uuid {
            self.0
        }
        fn passage(&self) -> String {
            String::new()
        }
        fn score(&self) -> f64 {
            self.1
        }
        fn set_score(&mut self, s: f64) {
            self.1 = s;
        }
    }

    fn ids(n: u128) -> Vec<Uuid> {
        (1..=n).map(Uuid::from_u128).collect()
    }

    #[test]
    fn rrf_sums_reciprocal_ranks_and_breaks_ties_by_first_appearance() {
        let u = ids(4);
        // Lists: [1, 2, 3] and [3, 4]. Scores: 1 → 1, 2 → 1/2, 3 → 1/3 + 1 = 4/3, 4 → 1/2.
        let a = vec![H(u[0], 0.0), H(u[1], 0.0), H(u[2], 0.0)];
        let b = vec![H(u[2], 0.0), H(u[3], 0.0)];
        let out = rrf(vec![(a, 1.0), (b, 1.0)]);
        let order: Vec<Uuid> = out.iter().map(|h| h.0).collect();
        assert_eq!(order, vec![u[2], u[0], u[1], u[3]]);
        assert!((out[0].1 - 4.0 / 3.0).abs() < 1e-12);
        assert!((out[2].1 - 0.5).abs() < 1e-12 && (out[3].1 - 0.5).abs() < 1e-12);
    }

    #[test]
    fn weighted_rrf_scales_each_list_by_its_weight() {
        let u = ids(3);
        // Lists [1, 2] weighing 0.5 and [2, 3] weighing 1. Scores: 1 → 0.5,
        // 2 → 0.25 + 1 = 1.25, 3 → 0.5; 1 and 3 tie, 1 appeared first.
        let a = vec![H(u[0], 0.0), H(u[1], 0.0)];
        let b = vec![H(u[1], 0.0), H(u[2], 0.0)];
        let out = rrf(vec![(a.clone(), 0.5), (b.clone(), 1.0)]);
        let order: Vec<Uuid> = out.iter().map(|h| h.0).collect();
        assert_eq!(order, vec![u[1], u[0], u[2]]);
        assert!((out[0].1 - 1.25).abs() < 1e-12 && (out[1].1 - 0.5).abs() < 1e-12);
        // Unweighted, 1 would score 1 and beat 3 (1/2) by more than a tie.
        assert!((rrf(vec![(a, 1.0), (b, 1.0)])[1].1 - 1.0).abs() < 1e-12);
        // A list fused with nothing keeps its own scores, whatever its weight.
        let alone = rrf(vec![(vec![H(u[0], 0.7)], 0.5), (Vec::new(), 1.0)]);
        assert!((alone[0].1 - 0.7).abs() < 1e-12);
    }

    #[test]
    fn greedy_mmr_keeps_one_of_two_near_duplicates() {
        let u = ids(3);
        // 1 and 2 are near-duplicates, both close to the query; 3 is less relevant but
        // different. λ = 0.5: pick 1 (0.5·0.9), then 3 (0.5·0.6 − 0.5·0.1 = 0.25) beats
        // 2 (0.5·0.89 − 0.5·0.99 = −0.05).
        let mut sims = BTreeMap::new();
        let m = |pairs: &[(Uuid, f64)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        sims.insert(u[0], (0.9, m(&[(u[1], 0.99), (u[2], 0.1)])));
        sims.insert(u[1], (0.89, m(&[(u[0], 0.99), (u[2], 0.1)])));
        sims.insert(u[2], (0.6, m(&[(u[0], 0.1), (u[1], 0.1)])));
        let out = mmr(vec![H(u[0], 0.0), H(u[1], 0.0), H(u[2], 0.0)], &sims, 0.5);
        let order: Vec<Uuid> = out.iter().map(|h| h.0).collect();
        assert_eq!(order, vec![u[0], u[2], u[1]]);
        assert!((out[1].1 - 0.25).abs() < 1e-12);
    }
}
