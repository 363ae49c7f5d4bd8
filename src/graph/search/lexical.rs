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
//!    index's own count), in one statement. A term commoner than the rarest term that
//!    alone fills the pool — by the counts observed lately in this graph
//!    ([`TermStats`](crate::falkordb::TermStats)) — is read only where it meets the
//!    rarer ones, and two or more such terms also where they all meet (their
//!    conjunction: a record matching every common term of `noah brown enjoy pottery`
//!    but not `pottery` can still belong in the pool); the pool is then checked
//!    exact, else more is read ([`fetch`]).
//! 2. **Weights** ([`Postings::pool`], in Rust): each term's
//!    `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`; a record's weight is the sum of the
//!    idfs of the terms it matches. The pool is the best `pool` records by weight and
//!    every record tied with the last of them (at most [`TIE_CAP`] × `pool`); ties by
//!    id. The cover is a fulltext query that every pooled record matches: each distinct
//!    set of terms a pooled record matches, together (`(a b) | (c)`).
//! 3. **The method's own statement** calls the procedure with the cover
//!    ([`Target::call`]) — it walks little more than the pool — keeps the
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
use crate::falkordb::{Observed, Params, Value};

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
    /// Every term read, in query order.
    terms: Vec<Term>,
    /// The most a record outside these postings can weigh: the idfs of the terms read
    /// only where they meet the others summed (0 when every term was read whole).
    bound: f64,
    /// Every matched record read, by weight, best first (ties by id).
    ranked: Vec<(i64, f64)>,
}

/// One query term's matches.
#[derive(Debug, Clone)]
struct Term {
    term: String,
    /// The matching records read: all of them when `whole`, else those that also
    /// match a term read whole.
    ids: Vec<i64>,
    /// The records matching the term (counted now when `whole`, else observed lately).
    df: u64,
    whole: bool,
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

/// The postings of `q` over each of `targets` in `ctx`'s graph, fetched concurrently,
/// exact for pools of up to `need` records (`None`: every match). A failed fetch is
/// left out: the method asks again and reports the error.
pub(crate) async fn prefetch(
    ctx: Ctx<'_>,
    targets: &[Target],
    q: &str,
    need: Option<usize>,
) -> Prefetched {
    let found = futures_util::future::join_all(
        targets.iter().map(|&t| Box::pin(fetch(ctx, t, q, need))),
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

/// The postings of the sanitised query `q` over `target`'s index, exact for a pool of
/// up to `need` records (`None`: every match): those fetched ahead for the search
/// ([`Prefetched`], in `ctx`) when they are, else [`fetch`]ed now.
pub(crate) async fn postings(
    ctx: Ctx<'_>,
    target: Target,
    q: &str,
    need: Option<usize>,
) -> Result<Postings> {
    if let Some(p) = ctx
        .lexical
        .and_then(|l| l.get(target, q))
        .filter(|p| p.exact_for(need))
    {
        return Ok(p.clone());
    }
    Box::pin(fetch(ctx, target, q, need)).await
}

/// The postings of the sanitised query `q` over `target`'s index, exact for a pool of
/// up to `need` records (`None`: every match). No index: no postings.
///
/// Every term's matches are read whole, unless the term counts observed lately
/// ([`TermStats`](crate::falkordb::TermStats)) name terms commoner than one that alone
/// matches a pool's worth of records ([`split`]): those are read only where they meet
/// the rarer ones (`common ((rare1) | (rare2))`, which the index answers by skipping
/// through the rarer lists), and, two or more of them, where they all meet
/// (`(common1) (common2)`). The pool is then checked: its last record must outweigh
/// any record not read — one matching only terms read in part, all of them but the
/// lightest when their conjunction was read ([`Postings::of`]). When it does not, the commonest of
/// those terms whose idfs still sum below that last weight stay read in part, the
/// others are read whole (a second statement; the last weight can only grow, so the
/// pool is then exact); and when even that fails — counts gone stale — every term is
/// read whole.
async fn fetch(ctx: Ctx<'_>, target: Target, q: &str, need: Option<usize>) -> Result<Postings> {
    let terms = terms(q);
    if terms.is_empty() {
        return Ok(Postings::default());
    }
    let stats = ctx.db.term_stats();
    let seen = |t: &str| stats.get(ctx.graph, target.label, t);
    let plan = need.and_then(|p| split(&terms, p, seen).map(|s| (p, s)));
    let Some((p, Split { whole, met })) = plan else {
        let (docs, read, _) = read_terms(ctx, target, &terms, &[]).await?;
        return Ok(finish(ctx, target, &terms, docs, read));
    };
    let (docs, read, together) = read_terms(ctx, target, &whole, &met).await?;
    // Observations made over a markedly different index are not trusted.
    let fresh = docs > 0
        && met
            .iter()
            .all(|(_, o)| o.docs.abs_diff(docs) as f64 <= DF_DRIFT * o.docs as f64);
    let mut partly: Vec<(String, Observed)> = met;
    let mut postings = Postings::of(docs, read, together);
    if fresh {
        if postings.exact_for(Some(p)) {
            return Ok(recorded(ctx, target, &terms, docs, postings));
        }
        // The commonest terms stay read in part while their idfs sum below the last
        // pooled weight so far; the others are read whole.
        let last = postings.last_weight(p).unwrap_or(f64::NEG_INFINITY);
        let mut sum = 0.0;
        let stay = partly
            .iter()
            .take_while(|(_, o)| {
                sum += idf(docs, o.df);
                sum < last
            })
            .count();
        let go: Vec<String> = partly.split_off(stay).into_iter().map(|(t, _)| t).collect();
        // Those left read in part are `partly`, whose conjunction this read covers.
        let (_, more, together) = read_terms(ctx, target, &go, &partly).await?;
        postings = Postings::of(docs, merge(postings.terms, more), together);
        if postings.exact_for(Some(p)) {
            return Ok(recorded(ctx, target, &terms, docs, postings));
        }
    }
    let rest: Vec<String> = partly.into_iter().map(|(t, _)| t).collect();
    let (more, whole, _) = read_terms(ctx, target, &rest, &[]).await?;
    let read = merge(postings.terms, whole);
    Ok(finish(ctx, target, &terms, docs.max(more), read))
}

/// How far an index's record count may have moved since a term was counted for the
/// count to weigh the term still.
const DF_DRIFT: f64 = 0.1;

fn whole_term(term: &str, ids: Vec<i64>) -> Term {
    Term {
        term: term.to_owned(),
        df: ids.len() as u64,
        ids,
        whole: true,
    }
}

/// Reads `whole` whole and each of `met` where it meets `whole` (every term whole
/// when `whole` is empty), in one statement: the index's record count and the terms.
/// With two or more of `met`, the records matching all of them are read too (their
/// conjunction, which the index answers by skipping through the rarest list) and
/// counted among each one's matches; the flag returned says so (see [`Postings::of`]).
async fn read_terms(
    ctx: Ctx<'_>,
    target: Target,
    whole: &[String],
    met: &[(String, Observed)],
) -> Result<(u64, Vec<Term>, bool)> {
    let (whole, met): (Vec<String>, &[(String, Observed)]) = if whole.is_empty() {
        (met.iter().map(|(t, _)| t.clone()).collect(), &[])
    } else {
        (whole.to_vec(), met)
    };
    let union = whole
        .iter()
        .map(|t| format!("({t})"))
        .collect::<Vec<_>>()
        .join(" | ");
    let meet = |t: &str| format!("({t}) ({union})");
    let mut queries = whole.clone();
    queries.extend(met.iter().map(|(t, _)| meet(t)));
    let together = (met.len() >= 2).then(|| {
        met.iter()
            .map(|(t, _)| format!("({t})"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    queries.extend(together.clone());
    let (docs, mut got) = read_postings(ctx, target, &queries).await?;
    let all_met = together
        .as_ref()
        .and_then(|q| got.remove(q))
        .unwrap_or_default();
    let mut read: Vec<Term> = whole
        .iter()
        .map(|t| whole_term(t, got.remove(t).unwrap_or_default()))
        .collect();
    read.extend(met.iter().map(|(t, o)| {
        let mut ids = got.remove(&meet(t)).unwrap_or_default();
        if !all_met.is_empty() {
            ids.extend_from_slice(&all_met);
            ids.sort_unstable();
            ids.dedup();
        }
        Term {
            term: t.clone(),
            ids,
            df: o.df,
            whole: false,
        }
    }));
    Ok((docs, read, together.is_some()))
}

/// `more` merged into `read`: a term read whole replaces what was read of it; a term
/// read in part again adds the matches found.
fn merge(mut read: Vec<Term>, more: Vec<Term>) -> Vec<Term> {
    for m in more {
        match read.iter_mut().find(|t| t.term == m.term) {
            Some(t) if m.whole => *t = m,
            Some(t) => {
                t.ids.extend(m.ids);
                t.ids.sort_unstable();
                t.ids.dedup();
            }
            None => read.push(m),
        }
    }
    read
}

/// The postings of the terms read, ranked once (see [`recorded`]). A server that does
/// not report the index's count (`docs` 0) counts the matches.
fn finish(ctx: Ctx<'_>, target: Target, order: &[String], mut docs: u64, read: Vec<Term>) -> Postings {
    if docs == 0 {
        let matched: HashSet<i64> = read
            .iter()
            .flat_map(|t| t.ids.iter().copied())
            .collect();
        docs = matched.len() as u64;
    }
    recorded(ctx, target, order, docs, Postings::of(docs, read, false))
}

/// `postings`, its terms read whole recorded in the handle's observations (over `docs`
/// records) and put in query order (the ranking does not depend on it).
fn recorded(ctx: Ctx<'_>, target: Target, order: &[String], docs: u64, mut postings: Postings) -> Postings {
    let stats = ctx.db.term_stats();
    for t in postings.terms.iter().filter(|t| t.whole) {
        stats.put(ctx.graph, target.label, &t.term, t.df, docs);
    }
    postings
        .terms
        .sort_by_key(|t| order.iter().position(|q| *q == t.term));
    postings
}

/// The terms of a query split by their observed counts (step 1 of the module docs).
#[derive(Debug, PartialEq)]
struct Split {
    /// Read whole: the rarer terms, and any term not observed lately.
    whole: Vec<String>,
    /// Read where they meet `whole`, commonest first.
    met: Vec<(String, Observed)>,
}

/// Which of `terms` to read whole for a pool of `pool` records, by the counts `seen`
/// observed lately; `None` when all of them.
///
/// The anchor is the rarest term observed to match at least `pool` records: it alone
/// fills the pool, so the pool's last record weighs at least its idf. The anchor, the
/// rarer terms and the terms not observed are read whole; the commoner ones where they
/// meet those ([`fetch`] checks the pool and reads more when needed).
fn split(terms: &[String], pool: usize, seen: impl Fn(&str) -> Option<Observed>) -> Option<Split> {
    let seen: Vec<Option<Observed>> = terms.iter().map(|t| seen(t)).collect();
    let anchor = seen
        .iter()
        .flatten()
        .filter(|o| o.df >= pool as u64)
        .map(|o| o.df)
        .min()?;
    let mut met: Vec<(usize, Observed)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.filter(|o| o.df > anchor).map(|o| (i, o)))
        .collect();
    if met.is_empty() {
        return None;
    }
    met.sort_by(|a, b| b.1.df.cmp(&a.1.df).then(a.0.cmp(&b.0)));
    Some(Split {
        whole: (0..terms.len())
            .filter(|i| !met.iter().any(|(m, _)| m == i))
            .map(|i| terms[i].clone())
            .collect(),
        met: met.into_iter().map(|(i, o)| (terms[i].clone(), o)).collect(),
    })
}

/// One statement: for each of `queries` (a term, or a term met with others), the ids
/// of the records matching it, and the index's record count (`db.indexes()`, which
/// FalkorDB answers from the index's own statistics; 0 from a server that does not
/// report it). The ids travel as one comma-separated string per query: thousands of
/// them as a list cost the server and the client more than the walk (measured on
/// `bench_recall`'s data: a postings round trip 7.3 ms with a list, 1.7 ms with the
/// string, from a Python client; the server's own time 1.53 and 1.42 ms).
async fn read_postings(
    ctx: Ctx<'_>,
    target: Target,
    queries: &[String],
) -> Result<(u64, HashMap<String, Vec<i64>>)> {
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
    let list = Value::List(queries.iter().cloned().map(Value::String).collect());
    let params = Params::new().set("ft_terms", list);
    // Boxed: the read's future is large, and every fulltext method awaits this.
    let rows = Box::pin(read_fixed(ctx, target.index(), &statement, &params)).await?;
    let mut docs = 0u64;
    let mut by_query: HashMap<String, Vec<i64>> = HashMap::new();
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
        by_query.insert(term.to_owned(), ids);
    }
    Ok((docs, by_query))
}

/// At most this many conjunctions make a pool's cover; more take the covering terms.
const MAX_CONJUNCTIONS: usize = 16;

/// The cover of `pool` as a fulltext query of conjunctions: for each distinct set of
/// terms a pooled record matches, those terms together (`(a b) | (c)`), a set that
/// holds another left out. The index walks little more than the pool itself: a
/// record matching all of a pooled record's terms weighs at least as much, so it is
/// pooled too (unless cut as a tie). `None` when there are more than
/// [`MAX_CONJUNCTIONS`] sets (or more than 64 terms).
fn conjunctions(terms: &[Term], pool: &[(i64, f64)]) -> Option<String> {
    if terms.len() > 64 {
        return None;
    }
    let pooled: HashSet<i64> = pool.iter().map(|x| x.0).collect();
    let mut matched: HashMap<i64, u64> = HashMap::new();
    for (i, t) in terms.iter().enumerate() {
        for id in t.ids.iter().filter(|id| pooled.contains(id)) {
            *matched.entry(*id).or_default() |= 1 << i;
        }
    }
    let mut sets: Vec<u64> = matched.into_values().collect();
    sets.sort_unstable();
    sets.dedup();
    let least: Vec<u64> = sets
        .iter()
        .copied()
        .filter(|&s| !sets.iter().any(|&o| o != s && o & s == o))
        .collect();
    if least.is_empty() || least.len() > MAX_CONJUNCTIONS {
        return None;
    }
    let each = least.iter().map(|&set| {
        let words: Vec<&str> = (0..terms.len())
            .filter(|i| set >> i & 1 == 1)
            .map(|i| terms[i].term.as_str())
            .collect();
        format!("({})", words.join(" "))
    });
    Some(each.collect::<Vec<_>>().join(" | "))
}

/// A term's idf for `df` matches among `docs` records.
fn idf(docs: u64, df: u64) -> f64 {
    let n = docs.max(df) as f64;
    let df = df as f64;
    ((n - df + 0.5) / (df + 0.5)).ln_1p()
}

impl Postings {
    /// Postings from `(term, ids)` lists and the number of records (tests, and the
    /// reasoning in the module docs).
    #[cfg(test)]
    pub(crate) fn new(docs: u64, terms: Vec<(&str, Vec<i64>)>) -> Postings {
        let terms = terms
            .into_iter()
            .map(|(t, ids)| whole_term(t, ids))
            .collect();
        Postings::of(docs, terms, false)
    }

    /// Postings of the terms read. The bound is the idfs of those read in part summed;
    /// when `together`, every record matching all of them (two or more) was read too,
    /// so a record not read matches at most all but one: the least of their idfs comes
    /// off.
    fn of(docs: u64, terms: Vec<Term>, together: bool) -> Postings {
        let partly: Vec<f64> = terms
            .iter()
            .filter(|t| !t.whole)
            .map(|t| idf(docs, t.df))
            .collect();
        let least = partly.iter().copied().fold(f64::INFINITY, f64::min);
        let bound = partly.iter().sum::<f64>()
            - if together && partly.len() >= 2 {
                least
            } else {
                0.0
            };
        let ranked = Postings::rank(docs, &terms);
        Postings {
            terms,
            bound,
            ranked,
        }
    }

    /// The weight of the `pool`-th best record read, if that many were.
    fn last_weight(&self, pool: usize) -> Option<f64> {
        self.ranked.get(pool.max(1) - 1).map(|x| x.1)
    }

    /// Every matched record of `terms`, by weight, best first (ties by id): the
    /// (id, idf) pairs sorted by id and summed per id.
    fn rank(docs: u64, terms: &[Term]) -> Vec<(i64, f64)> {
        let mut pairs: Vec<(i64, f64)> = Vec::with_capacity(terms.iter().map(|t| t.ids.len()).sum());
        for t in terms {
            let idf = idf(docs, t.df);
            pairs.extend(t.ids.iter().map(|&id| (id, idf)));
        }
        pairs.sort_unstable_by_key(|x| x.0);
        let mut ranked: Vec<(i64, f64)> = Vec::with_capacity(pairs.len());
        for (id, w) in pairs {
            match ranked.last_mut() {
                Some(last) if last.0 == id => last.1 += w,
                _ => ranked.push((id, w)),
            }
        }
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }

    /// Whether the pool of the best `pool` records (every match when `None`) is exact:
    /// always when every term was read whole; else when the pool's last record
    /// outweighs any record these postings do not hold.
    fn exact_for(&self, pool: Option<usize>) -> bool {
        if self.terms.iter().all(|t| t.whole) {
            return true;
        }
        let Some(p) = pool else {
            return false;
        };
        self.last_weight(p).is_some_and(|last| last > self.bound)
    }

    /// The pool of the best `pool` records by weight (every match when `None`) and
    /// their covering terms (step 2 of the module docs); `None` when nothing matched.
    pub(crate) fn pool(&self, pool: Option<usize>) -> Option<Lexical> {
        debug_assert!(self.exact_for(pool), "postings read for a smaller pool");
        let all = &self.ranked;
        if all.is_empty() {
            return None;
        }
        let kept = match pool {
            None => all.len(),
            Some(p) => {
                let p = p.max(1).min(all.len());
                let last = all[p - 1].1;
                let tied = all.iter().take_while(|x| x.1 >= last).count();
                tied.min(p.saturating_mul(TIE_CAP)).max(p)
            }
        };
        let ranked = all[..kept].to_vec();
        let cover = conjunctions(&self.terms, &ranked).unwrap_or_else(|| {
            // The rarest terms read whole first, each kept when it holds a pooled
            // record not yet held. A pooled record that matches no term read whole
            // matches every term read in part (it was read as their conjunction):
            // that conjunction covers the rest.
            let mut left: HashSet<i64> = ranked.iter().map(|x| x.0).collect();
            let mut by_rarity: Vec<&Term> = self.terms.iter().filter(|t| t.whole).collect();
            by_rarity.sort_by_key(|t| t.df);
            let mut cover: Vec<String> = Vec::new();
            for t in by_rarity {
                if left.is_empty() {
                    break;
                }
                let before = left.len();
                for id in &t.ids {
                    left.remove(id);
                }
                if left.len() < before {
                    cover.push(t.term.clone());
                }
            }
            if !left.is_empty() {
                let partly: Vec<String> = self
                    .terms
                    .iter()
                    .filter(|t| !t.whole)
                    .map(|t| format!("({})", t.term))
                    .collect();
                cover.push(format!("({})", partly.join(" ")));
            }
            cover.join(" | ")
        });
        Some(Lexical {
            cover,
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
        assert_eq!(lex.cover, "(rare)");
    }

    #[test]
    fn the_rarer_term_weighs_more() {
        let p = Postings::new(1000, vec![("a", vec![1]), ("b", (2..=400).collect())]);
        let lex = p.pool(None).unwrap();
        assert_eq!(lex.pool[0].0, 1);
        assert!(lex.pool[0].1 > lex.pool[1].1 * 3.0, "{:?}", &lex.pool[..2]);
        assert_eq!(lex.pool.len(), 400, "every match without a pool size");
        assert_eq!(lex.cover, "(a) | (b)");
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

    fn observed(df: u64, docs: u64) -> Option<Observed> {
        let s = crate::falkordb::TermStats::default();
        s.put("g", "L", "t", df, docs);
        s.get("g", "L", "t")
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn terms_commoner_than_one_that_fills_the_pool_are_read_where_they_meet_the_rarer() {
        // 10,000 records: `pottery` 133, `noah` 598, `brown` 941, `enjoy` 1,728; `does`
        // not observed. A pool of 40: `pottery` alone fills it.
        let terms = strings(&["does", "noah", "brown", "enjoy", "pottery"]);
        let seen = |t: &str| match t {
            "pottery" => observed(133, 10_000),
            "noah" => observed(598, 10_000),
            "brown" => observed(941, 10_000),
            "enjoy" => observed(1728, 10_000),
            _ => None,
        };
        let split = split(&terms, 40, seen).unwrap();
        assert_eq!(split.whole, ["does", "pottery"]);
        let met: Vec<&str> = split.met.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(met, ["enjoy", "brown", "noah"], "commonest first");
        // A pool larger than `pottery`'s matches: `noah` is the anchor.
        let larger = super::split(&terms, 200, seen).unwrap();
        assert_eq!(larger.whole, ["does", "noah", "pottery"]);
    }

    #[test]
    fn every_term_is_read_whole_without_counts_to_go_by() {
        let terms = strings(&["a", "b"]);
        // Nothing observed.
        assert_eq!(split(&terms, 10, |_| None), None);
        // No term matches as many records as the pool holds: no floor.
        assert_eq!(split(&terms, 10, |_| observed(5, 1000)), None);
        // One term only: it is its own floor.
        assert_eq!(split(&strings(&["a"]), 10, |_| observed(50, 1000)), None);
        // A term not observed lately is read whole, whatever the others.
        let seen = |t: &str| (t == "a").then(|| observed(900, 1000)).flatten();
        assert_eq!(split(&strings(&["a", "b", "c"]), 10, seen), None);
        let seen = |t: &str| if t == "c" { None } else if t == "a" { observed(900, 1000) } else { observed(20, 1000) };
        let split = split(&strings(&["a", "b", "c"]), 10, seen).unwrap();
        assert_eq!(split.whole, ["b", "c"]);
    }

    /// Postings with `common` read only where it meets `rare`: `common` matches `df`
    /// of 1,000 records, of which `met` match `rare` too.
    fn partial(rare: Vec<i64>, met: Vec<i64>, df: u64) -> Postings {
        let p = Postings::of(
            1000,
            vec![
                whole_term("rare", rare),
                Term {
                    term: "common".into(),
                    ids: met,
                    df,
                    whole: false,
                },
            ],
            false,
        );
        assert_eq!(p.bound, idf(1000, df));
        p
    }

    fn part(term: &str, ids: Vec<i64>, df: u64) -> Term {
        Term {
            term: term.into(),
            ids,
            df,
            whole: false,
        }
    }

    #[test]
    fn terms_read_in_part_and_together_bound_the_unread_by_all_of_them_but_the_lightest() {
        // `rare` 40 records (idf 3.2); `c1` 300 (1.2) and `c2` 500 (0.7) read where
        // they meet `rare` and where they meet each other: records 100..=104 match both
        // and no `rare` (1.9).
        let both: Vec<i64> = (100..=104).collect();
        let c1: Vec<i64> = [vec![1, 2], both.clone()].concat();
        let c2: Vec<i64> = [vec![1], both.clone()].concat();
        let terms = || {
            vec![
                whole_term("rare", (1..=40).collect()),
                part("c1", c1.clone(), 300),
                part("c2", c2.clone(), 500),
            ]
        };
        let (i1, i2) = (idf(1000, 300), idf(1000, 500));
        let alone = Postings::of(1000, terms(), false);
        assert_eq!(alone.bound, i1 + i2);
        let together = Postings::of(1000, terms(), true);
        assert_eq!(together.bound, i1, "all but the lightest, `c2`");
        // The 45th best is a `c1 c2` record (1.9): above `c1` alone (1.2), not above
        // both (1.9) — only the read conjunction makes the pool exact.
        assert!(together.exact_for(Some(45)));
        assert!(!alone.exact_for(Some(45)));
        let lex = together.pool(Some(45)).unwrap();
        assert!(both.iter().all(|id| lex.pool.iter().any(|x| x.0 == *id)));
        assert!(lex.cover.contains("(c1 c2)"), "{}", lex.cover);
        // One term read in part: nothing to read together, the bound is its idf.
        let one = Postings::of(1000, vec![whole_term("rare", vec![1]), part("c1", vec![1], 300)], true);
        assert_eq!(one.bound, i1);
    }

    #[test]
    fn a_record_read_only_as_the_conjunction_is_covered_when_the_terms_cover() {
        // More term sets than conjunctions allowed, so the cover is terms: seventeen
        // rare terms of one record each, and record 100 matching only `c1` and `c2`.
        let mut terms: Vec<Term> = (0..=MAX_CONJUNCTIONS as i64)
            .map(|i| whole_term(&format!("t{i}"), vec![i]))
            .collect();
        terms.push(part("c1", vec![100], 500));
        terms.push(part("c2", vec![100], 500));
        let p = Postings::of(1000, terms, true);
        let pool = MAX_CONJUNCTIONS + 2;
        assert!(p.exact_for(Some(pool)));
        let lex = p.pool(Some(pool)).unwrap();
        assert!(lex.pool.iter().any(|x| x.0 == 100));
        assert!(lex.cover.ends_with(" | ((c1) (c2))"), "{}", lex.cover);
    }

    #[test]
    fn a_partly_read_pool_is_exact_only_when_its_last_record_outweighs_the_unread() {
        // `rare` matches 50 records (idf 3.0), `common` 600 (0.4): the 10th best weighs
        // at least 3.0 > 0.4.
        let p = partial((1..=50).collect(), vec![1, 2, 3], 600);
        assert!(p.exact_for(Some(10)));
        assert!(p.exact_for(Some(50)));
        // Fewer matches read than the pool: a common-only record could be in it.
        assert!(!p.exact_for(Some(51)));
        assert!(!p.exact_for(None), "every match needs every term whole");
        let lex = p.pool(Some(2)).unwrap();
        assert_eq!(lex.pool.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(lex.cover, "(rare common)", "the pool's terms together");
        // A common term worth more than the rare one: not exact.
        let p = partial((1..=50).collect(), vec![1], 10);
        assert!(!p.exact_for(Some(10)));
        // Whole postings are exact for any pool.
        assert!(Postings::new(1000, vec![("x", vec![1])]).exact_for(None));
    }

    #[test]
    fn the_cover_is_each_pooled_set_of_terms_together_a_set_holding_another_left_out() {
        // 1: a b c; 2: a b; 3: c; 4: a b (so `a b c` holds `a b`).
        let p = Postings::new(
            1000,
            vec![("a", vec![1, 2, 4]), ("b", vec![1, 2, 4]), ("c", vec![1, 3])],
        );
        let lex = p.pool(None).unwrap();
        assert_eq!(lex.cover, "(a b) | (c)");
        // More sets than conjunctions allowed: the covering terms, rarest first.
        let terms: Vec<(String, Vec<i64>)> = (0..=MAX_CONJUNCTIONS as i64)
            .map(|i| (format!("t{i}"), vec![i]))
            .collect();
        let p = Postings::new(
            1000,
            terms.iter().map(|(t, ids)| (t.as_str(), ids.clone())).collect(),
        );
        let lex = p.pool(None).unwrap();
        assert_eq!(lex.cover.split(" | ").count(), MAX_CONJUNCTIONS + 1);
        assert!(!lex.cover.contains('('), "{}", lex.cover);
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
