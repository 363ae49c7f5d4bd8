//! The lexical ranking: BM25 over FalkorDB's fulltext indices.
//!
//! FalkorDB's fulltext procedures (`db.idx.fulltext.queryNodes`,
//! `db.idx.fulltext.queryRelationships`) find every record matching a query, but the
//! `score` they yield is not a relevance ranking. Measured on the embedded server
//! (FalkorDB 4.16, 10,000 facts): a record matching one term scores a per-term weight,
//! and a record matching several scores *less* than one matching only the rarest of
//! them — for `noah | pottery`, facts with only `pottery` score 10, facts with only
//! `noah` 4, facts with both 3.5 or less (see also FalkorDB issue #1208). Ordered by that
//! score, the best matches were the ones that matched the fewest terms; recall over a
//! public long-conversation benchmark trailed plain BM25 by 30–45 points at every k.
//!
//! So the fulltext methods rank matches themselves, by BM25 with each matched term
//! counted once (binary term frequency), in two statements:
//!
//! 1. **Postings** ([`postings`]): for each query term, the ids of the records that
//!    match it (one procedure call per term, so the index's stemming and tokenizer
//!    decide what matches, as before), and the number of indexed records `N` (the
//!    index's own count), in one statement.
//! 2. **Weights** ([`Postings::pool`], in Rust): each term's
//!    `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`; a record's weight is the sum of the
//!    idfs of the terms it matches. The pool is the best `pool` records by weight and
//!    every record tied with the last of them (at most [`TIE_CAP`] × `pool`); ties by
//!    id. The covering terms are the rarest terms whose postings together hold every
//!    pooled record.
//! 3. **The method's own statement** calls the procedure with the covering terms only
//!    ([`Target::call`]) — a pool of rare-term matches walks few postings — keeps the
//!    pooled records (their weights travel in the parameter `$ft_scores`), and
//!    normalises each weight by the record's text length against the pool's mean:
//!    `weight × (k1 + 1) / (1 + k1 × (1 − b + b × len / mean))`, with `k1` [`K1`] and `b`
//!    [`B`] — BM25 for terms that occur once in a record. Then the method goes on as
//!    before: the best `k`, the filters, the cut to `n`.
//!
//! A query term the index does not hold matches nothing and adds nothing. A record
//! created between the two statements is not in the pool; one removed between them
//! is not found by the second.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::Result;
use crate::falkordb::{Params, Value};

use super::methods::{Ctx, Index, read_fixed};

/// BM25's term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's length normalisation.
pub const B: f64 = 0.75;
/// Records tied with the last of a pool join it, up to this many times its size.
pub const TIE_CAP: usize = 4;

/// A fulltext index the methods rank over: the label (or relationship type), whether
/// it indexes nodes, the variable its procedure yields, and the text properties whose
/// length normalises a record's weight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    label: &'static str,
    node: bool,
    text: &'static [&'static str],
}

/// Facts (`RELATES_TO`): their text.
pub(crate) const FACTS: Target = Target {
    label: "RELATES_TO",
    node: false,
    text: &["fact"],
};
/// Entities: name and summary.
pub(crate) const ENTITIES: Target = Target {
    label: "Entity",
    node: true,
    text: &["name", "summary"],
};
/// Episodes: their content.
pub(crate) const EPISODES: Target = Target {
    label: "Episodic",
    node: true,
    text: &["content"],
};
/// Communities: their name.
pub(crate) const COMMUNITIES: Target = Target {
    label: "Community",
    node: true,
    text: &["name"],
};

impl Target {
    fn procedure(self) -> &'static str {
        if self.node {
            "db.idx.fulltext.queryNodes"
        } else {
            "db.idx.fulltext.queryRelationships"
        }
    }

    /// The variable the procedure yields: `node` or `relationship`.
    pub(crate) fn var(self) -> &'static str {
        if self.node { "node" } else { "relationship" }
    }

    /// The index, to tell a missing one from other failures.
    pub(crate) fn index(self) -> Index {
        Index::Fulltext(self.label, self.node)
    }

    /// The clauses that take the place of `CALL <procedure>('<label>', $q) YIELD
    /// <var>, score`: the pooled records matching `$q` (the covering terms), bound to
    /// [`var`](Self::var) and `score`, their BM25 score (step 3 of the module docs).
    /// They read the parameters `$q` and `$ft_scores` ([`Lexical::params`]).
    pub(crate) fn call(self) -> String {
        let (label, var, procedure) = (self.label, self.var(), self.procedure());
        let len = self
            .text
            .iter()
            .map(|p| format!("size(coalesce({var}.{p}, ''))"))
            .collect::<Vec<_>>()
            .join(" + ");
        format!(
            "CALL {procedure}('{label}', $q) YIELD {var} \
             WITH {var}, $ft_scores['i' + toString(id({var}))] AS ft_w WHERE ft_w IS NOT NULL \
             WITH collect([{var}, ft_w, toFloat({len})]) AS ft_pool \
             WITH ft_pool, CASE WHEN size(ft_pool) = 0 THEN 1.0 \
                  ELSE reduce(s = 0.0, x IN ft_pool | s + x[2]) / size(ft_pool) END AS ft_mean \
             UNWIND ft_pool AS ft_x \
             WITH ft_x[0] AS {var}, ft_x[1] * {k1p1:?} / (1.0 + {K1:?} * ({one_b:?} + {B:?} * ft_x[2] / \
                  CASE WHEN ft_mean > 0.0 THEN ft_mean ELSE 1.0 END)) AS score",
            k1p1 = K1 + 1.0,
            one_b = 1.0 - B,
        )
    }
}

/// Each query term's matching records (step 1 of the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Postings {
    /// The records the index holds (at least every record matched).
    docs: u64,
    /// `(term, ids)` for every term that matched something, in query order.
    terms: Vec<(String, Vec<i64>)>,
}

/// The pooled records' weights and the covering terms: what the method's statement
/// needs ([`Lexical::params`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lexical {
    /// The covering terms as a fulltext query (`a | b`).
    pub cover: String,
    /// `(id, weight)`, best first.
    pub pool: Vec<(i64, f64)>,
}

impl Lexical {
    /// `params` with `$q` (the covering terms) and `$ft_scores` (`i<id>` → weight).
    pub(crate) fn params(&self, params: Params) -> Params {
        let scores: BTreeMap<String, Value> = self
            .pool
            .iter()
            .map(|&(id, w)| (format!("i{id}"), Value::Float(w)))
            .collect();
        params
            .set("q", self.cover.as_str())
            .set("ft_scores", Value::Map(scores))
    }
}

/// The terms of a sanitised fulltext query (`a | b | c`, as
/// [`fulltext_query`](crate::falkordb::fulltext_query) builds it: each term escaped,
/// so none holds the separator).
fn terms(q: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in q.split(" | ").map(str::trim).filter(|t| !t.is_empty()) {
        if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
    }
    out
}

/// Postings fetched ahead for one graph — while the query is embedded, see
/// [`search_many`](super::search_many) — for one query text, per index.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prefetched {
    q: String,
    by_label: Vec<(&'static str, Postings)>,
}

impl Prefetched {
    fn get(&self, target: Target, q: &str) -> Option<&Postings> {
        if self.q != q {
            return None;
        }
        self.by_label
            .iter()
            .find(|(label, _)| *label == target.label)
            .map(|(_, p)| p)
    }
}

/// The postings of `q` over each of `targets` in `ctx`'s graph, fetched concurrently.
/// A failed fetch is left out: the method asks again and reports the error.
pub(crate) async fn prefetch(ctx: Ctx<'_>, targets: &[Target], q: &str) -> Prefetched {
    let found = futures_util::future::join_all(
        targets.iter().map(|&t| Box::pin(fetch(ctx, t, q))),
    )
    .await;
    Prefetched {
        q: q.to_owned(),
        by_label: targets
            .iter()
            .zip(found)
            .filter_map(|(t, p)| p.ok().map(|p| (t.label, p)))
            .collect(),
    }
}

/// The postings of the sanitised query `q` over `target`'s index: those fetched ahead
/// for the search ([`Prefetched`], in `ctx`), else [`fetch`]ed now.
pub(crate) async fn postings(ctx: Ctx<'_>, target: Target, q: &str) -> Result<Postings> {
    if let Some(p) = ctx.lexical.and_then(|l| l.get(target, q)) {
        return Ok(p.clone());
    }
    Box::pin(fetch(ctx, target, q)).await
}

/// The postings of the sanitised query `q` over `target`'s index, in one statement:
/// each term's matching record ids (the procedure's walk) and the index's document
/// count (`db.indexes()`, which FalkorDB answers from the index's own statistics; a
/// server that does not report it leaves the number of records matched). No index:
/// no postings. The ids travel as one comma-separated string per term: thousands of
/// them as a list cost the server and the client more than the walk (measured on
/// `bench_recall`'s data: a postings round trip 7.3 ms with a list, 1.7 ms with the
/// string, from a Python client; the server's own time 1.53 and 1.42 ms).
async fn fetch(ctx: Ctx<'_>, target: Target, q: &str) -> Result<Postings> {
    let terms = terms(q);
    if terms.is_empty() {
        return Ok(Postings::default());
    }
    let (procedure, label, var) = (target.procedure(), target.label, target.var());
    let kind = if target.node { "NODE" } else { "RELATIONSHIP" };
    let statement = format!(
        "CALL db.indexes() YIELD label AS ft_l, entitytype AS ft_e, info AS ft_i \
         WHERE ft_l = '{label}' AND ft_e = '{kind}' \
         WITH collect(ft_i.numDocuments) AS ft_ns \
         UNWIND $ft_terms AS ft_t CALL {procedure}('{label}', ft_t) YIELD {var} \
         RETURN ft_t AS term, ft_ns[0] AS docs, \
         string.join(collect(toString(id({var}))), ',') AS ids"
    );
    let term_list = Value::List(terms.iter().cloned().map(Value::String).collect());
    let params = Params::new().set("ft_terms", term_list);
    // Boxed: the read's future is large, and every fulltext method awaits this.
    let rows = Box::pin(read_fixed(ctx, target.index(), &statement, &params)).await?;
    let mut docs = 0u64;
    let mut by_term: HashMap<String, Vec<i64>> = HashMap::new();
    for row in rows {
        if let Some(n) = row.get("docs").and_then(Value::as_int) {
            docs = docs.max(u64::try_from(n).unwrap_or(0));
        }
        let (Some(term), Some(ids)) = (
            row.get("term").and_then(Value::as_str),
            row.get("ids").and_then(Value::as_str),
        ) else {
            continue;
        };
        let ids: Vec<i64> = ids.split(',').filter_map(|i| i.parse().ok()).collect();
        by_term.insert(term.to_owned(), ids);
    }
    let terms: Vec<(String, Vec<i64>)> = terms
        .into_iter()
        .filter_map(|t| by_term.remove(&t).map(|ids| (t, ids)))
        .filter(|(_, ids)| !ids.is_empty())
        .collect();
    // The index's count holds every match; only a server that does not report it
    // needs the matches counted.
    if docs == 0 {
        let matched: HashSet<i64> = terms
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        docs = matched.len() as u64;
    }
    Ok(Postings { docs, terms })
}

impl Postings {
    /// Postings from `(term, ids)` lists and the number of records (tests, and the
    /// reasoning in the module docs).
    #[cfg(test)]
    pub(crate) fn new(docs: u64, terms: Vec<(&str, Vec<i64>)>) -> Postings {
        Postings {
            docs,
            terms: terms
                .into_iter()
                .map(|(t, ids)| (t.to_owned(), ids))
                .collect(),
        }
    }

    /// A term's idf for `df` matches among the records.
    fn idf(&self, df: usize) -> f64 {
        let n = self.docs.max(df as u64) as f64;
        let df = df as f64;
        ((n - df + 0.5) / (df + 0.5)).ln_1p()
    }

    /// The pool of the best `pool` records by weight (every match when `None`) and
    /// their covering terms (step 2 of the module docs); `None` when nothing matched.
    pub(crate) fn pool(&self, pool: Option<usize>) -> Option<Lexical> {
        let mut weight: HashMap<i64, f64> = HashMap::new();
        for (_, ids) in &self.terms {
            let idf = self.idf(ids.len());
            for &id in ids {
                *weight.entry(id).or_insert(0.0) += idf;
            }
        }
        if weight.is_empty() {
            return None;
        }
        let mut ranked: Vec<(i64, f64)> = weight.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if let Some(p) = pool {
            let p = p.max(1).min(ranked.len());
            let last = ranked[p - 1].1;
            let tied = ranked.iter().take_while(|x| x.1 >= last).count();
            ranked.truncate(tied.min(p.saturating_mul(TIE_CAP)).max(p));
        }
        // The rarest terms first, each kept when it holds a pooled record not yet held.
        let mut left: HashSet<i64> = ranked.iter().map(|x| x.0).collect();
        let mut by_rarity: Vec<&(String, Vec<i64>)> = self.terms.iter().collect();
        by_rarity.sort_by_key(|(_, ids)| ids.len());
        let mut cover: Vec<&str> = Vec::new();
        for (term, ids) in by_rarity {
            if left.is_empty() {
                break;
            }
            let before = left.len();
            for id in ids {
                left.remove(id);
            }
            if left.len() < before {
                cover.push(term);
            }
        }
        Some(Lexical {
            cover: cover.join(" | "),
            pool: ranked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_matching_more_terms_outweighs_one_matching_fewer() {
        // 100 records; `rare` matches 1 and 2, `common` matches 1 and 3..=51.
        let common: Vec<i64> = std::iter::once(1).chain(3..=51).collect();
        let p = Postings::new(100, vec![("common", common), ("rare", vec![1, 2])]);
        let lex = p.pool(Some(2)).unwrap();
        assert_eq!(lex.pool[0].0, 1, "both terms beat one: {:?}", lex.pool);
        assert_eq!(lex.pool[1].0, 2, "the rare term beats the common one");
        assert!(lex.pool[0].1 > lex.pool[1].1, "{:?}", lex.pool);
        // The pool's two records are both held by `rare`: the common term is not walked.
        assert_eq!(lex.cover, "rare");
    }

    #[test]
    fn the_rarer_term_weighs_more() {
        let p = Postings::new(1000, vec![("a", vec![1]), ("b", (2..=400).collect())]);
        let lex = p.pool(None).unwrap();
        assert_eq!(lex.pool[0].0, 1);
        assert!(lex.pool[0].1 > lex.pool[1].1 * 3.0, "{:?}", &lex.pool[..2]);
        assert_eq!(lex.pool.len(), 400, "every match without a pool size");
        assert_eq!(lex.cover, "a | b");
    }

    #[test]
    fn records_tied_with_the_last_join_the_pool_up_to_the_cap() {
        let p = Postings::new(100, vec![("x", (1..=30).collect())]);
        assert_eq!(p.pool(Some(5)).unwrap().pool.len(), 5 * TIE_CAP);
        let p = Postings::new(100, vec![("x", (1..=7).collect())]);
        let lex = p.pool(Some(5)).unwrap();
        assert_eq!(lex.pool.len(), 7);
        // Ties in id order.
        assert_eq!(lex.pool.iter().map(|x| x.0).collect::<Vec<_>>(), (1..=7).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_matched_is_no_pool() {
        assert_eq!(Postings::new(10, vec![]).pool(Some(3)), None);
        assert_eq!(Postings::default().pool(None), None);
    }

    #[test]
    fn a_term_matching_every_record_still_counts_a_little() {
        let p = Postings::new(10, vec![("all", (1..=10).collect()), ("one", vec![3])]);
        let lex = p.pool(None).unwrap();
        assert!(lex.pool.iter().all(|x| x.1 > 0.0), "{:?}", lex.pool);
        assert_eq!(lex.pool[0].0, 3);
    }

    #[test]
    fn query_terms_are_split_and_deduplicated() {
        assert_eq!(terms("a | b\\|c | a"), ["a", "b\\|c"]);
        assert!(terms("").is_empty());
    }

    #[test]
    fn the_weights_travel_as_a_map_of_identifiers() {
        let lex = Lexical {
            cover: "a".into(),
            pool: vec![(7, 1.5), (0, 0.5)],
        };
        let params = lex.params(Params::new());
        let text = format!("{params:?}");
        assert!(text.contains("i7") && text.contains("i0"), "{text}");
    }
}
