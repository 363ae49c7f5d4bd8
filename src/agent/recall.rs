//! Recall: one fact search across the operator's accessible Destinations, rendered as
//! an untrusted memory block for the agent's context, within a deadline.
//!
//! The block is byte-exact (each fact a `format_fact` line, timestamps normalised):
//!
//! ```text
//! <gralkor-memory trust="untrusted">
//! - Ada prefers tea. (created 2024-05-01T12:00:00+0) (source: conversation — chat [lens: personal-chat]; episode: …)
//!
//! Search memory (up to 3 times, diverse queries) if you need more detail.
//! </gralkor-memory>
//! ```
//!
//! and its body is `NO_RELEVANT_MEMORIES` when nothing was found.
//!
//! * **Results**: at most [`RecallOptions::max_results`] facts (default
//!   `DEFAULT_RECALL_MAX_RESULTS` = 10) in all. Each Destination ranks its own
//!   facts (scores are comparable only within one Destination), so the lists are
//!   merged by rank — every Destination's best fact, then every second best, … in
//!   Destination order — and cut at the limit.
//! * **Deadline**: [`RecallOptions::deadline`] (default `DEFAULT_RECALL_DEADLINE` =
//!   12 s, must be positive). When it passes the search is cancelled (its future is
//!   dropped: work already sent to the database finishes unobserved), a warning is
//!   logged and [`Error::RecallDeadlineExpired`] returned. No retry.
//! * **Partial results** (opt-in, [`RecallOptions::partial`]): one search per
//!   Destination, concurrently; at the deadline the Destinations that answered are
//!   rendered and the [`Recalled::partial`] flag and [`Recalled::missing`] list say
//!   which did not (all missing is still the deadline error). The trade-off: the
//!   client embeds the query once per search call, so partial recall costs one query
//!   embedding per Destination instead of one in all, and a failure of one Destination
//!   fails the recall as in the default mode.
//! * **Episodes standing in as facts** (a storage that does not extract returns a
//!   stored episode as a fact, its whole content): each presents its best passages
//!   for the query, at most 2,000 bytes: its lines (a conversation's turns) scored by
//!   the query's words, rarer words weighing more, the best kept in their order. So a
//!   long session costs a few relevant turns, not its whole transcript. The line
//!   still names the episode (its uuid) and its date.
//! * Recall makes no model call: the agent's own model interprets the block.
//! * Logs: `recall` (info: session, operator, query characters, limit) and `recall
//!   result` (info: facts, block characters, milliseconds); the query and block only at
//!   debug level.

use std::time::{Duration, Instant};

use tracing::Instrument;

use super::format::format_fact;
use crate::access::Subject;
use crate::client::{Client, OperatorId, Search, SearchResult};
use crate::storage::MAX_RESULTS_LIMIT;
use crate::{Error, Result};

/// The facts a recall presents by default.
pub(crate) const DEFAULT_RECALL_MAX_RESULTS: usize = 10;
/// The default recall deadline.
pub(crate) const DEFAULT_RECALL_DEADLINE: Duration = Duration::from_secs(12);
/// The block's body when nothing was found.
pub(crate) const NO_RELEVANT_MEMORIES: &str = "No relevant memories found.";
/// The sentence closing every block.
pub(crate) const FURTHER_SEARCH: &str =
    "Search memory (up to 3 times, diverse queries) if you need more detail.";
internal_item!(
    /// How the block opens.
    pub const BLOCK_OPEN: &str = "<gralkor-memory trust=\"untrusted\">";
);
/// The most bytes of an episode standing in as a fact that recall presents: its best
/// passages for the query ([`best_passages`]).
pub(crate) const EPISODE_CONTEXT_BYTES: usize = 2_000;
/// Words of a question that say nothing about its subject, besides the fulltext
/// stopwords: they do not select passages.
const QUESTION_WORDS: &[&str] = &[
    "what", "when", "where", "which", "who", "whom", "whose", "why", "how", "did", "does", "do",
    "has", "have", "had",
];
/// How the block closes.
pub(crate) const BLOCK_CLOSE: &str = "</gralkor-memory>";

/// How a recall searches.
///
/// ```
/// use std::time::Duration;
/// use gralkor::agent::recall::RecallOptions;
///
/// let options = RecallOptions::new().max_results(5).deadline(Duration::from_millis(800));
/// options.validate()?;
/// let err = RecallOptions::new().deadline(Duration::ZERO).validate().unwrap_err();
/// assert!(err.to_string().contains("`recall.deadline` must be positive"));
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecallOptions {
    /// Facts presented in all (1–200, default 10).
    pub max_results: usize,
    /// How long the search may take (positive, default 12 s).
    pub deadline: Duration,
    /// Return what the Destinations that answered in time found, marked partial,
    /// instead of the deadline error (default off; see the module docs for its cost).
    pub partial: bool,
    /// Who is asking, for a client with an authorizer (which refuses a search
    /// without one).
    pub subject: Option<Subject>,
}

impl Default for RecallOptions {
    fn default() -> Self {
        RecallOptions {
            max_results: DEFAULT_RECALL_MAX_RESULTS,
            deadline: DEFAULT_RECALL_DEADLINE,
            partial: false,
            subject: None,
        }
    }
}

impl RecallOptions {
    /// The defaults: 10 facts, 12 s, no partial results.
    pub fn new() -> RecallOptions {
        RecallOptions::default()
    }

    /// Facts presented in all.
    pub fn max_results(mut self, n: usize) -> Self {
        self.max_results = n;
        self
    }

    /// The deadline.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Partial results at the deadline.
    pub fn partial(mut self, partial: bool) -> Self {
        self.partial = partial;
        self
    }

    /// Who is asking (needed by a client with an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// Checks the options: the deadline must be positive and the limit within
    /// 1–[`MAX_RESULTS_LIMIT`].
    pub fn validate(&self) -> Result<()> {
        if self.deadline.is_zero() {
            return Err(Error::config("recall.deadline", "must be positive"));
        }
        if self.max_results == 0 || self.max_results > MAX_RESULTS_LIMIT {
            return Err(Error::config(
                "recall.max_results",
                format!("must be between 1 and {MAX_RESULTS_LIMIT}"),
            ));
        }
        Ok(())
    }
}

/// What a recall found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Recalled {
    /// The memory block to inject (see the module docs).
    pub block: String,
    /// The facts in the block, in block order.
    pub facts: Vec<SearchResult>,
    /// Whether some Destinations did not answer in time (partial mode only).
    pub partial: bool,
    /// The Destinations that did not answer in time, in Destination order.
    pub missing: Vec<String>,
}

/// The memory block around `body` (the rendered fact lines, or
/// `NO_RELEVANT_MEMORIES` when `body` is empty).
///
/// ```
/// use gralkor::agent::recall::memory_block;
///
/// assert_eq!(
///     memory_block(""),
///     "<gralkor-memory trust=\"untrusted\">\nNo relevant memories found.\n\n\
///      Search memory (up to 3 times, diverse queries) if you need more detail.\n\
///      </gralkor-memory>"
/// );
/// ```
pub fn memory_block(body: &str) -> String {
    let body = if body.is_empty() {
        NO_RELEVANT_MEMORIES
    } else {
        body
    };
    format!("{BLOCK_OPEN}\n{body}\n\n{FURTHER_SEARCH}\n{BLOCK_CLOSE}")
}

/// The memory block named `name` (`<name trust="untrusted">` … `</name>`) around
/// `body`; `gralkor-memory` gives [`memory_block`]'s.
pub(crate) fn memory_block_named(name: &str, body: &str) -> String {
    if name == DEFAULT_BLOCK_NAME {
        return memory_block(body);
    }
    let body = if body.is_empty() {
        NO_RELEVANT_MEMORIES
    } else {
        body
    };
    format!("<{name} trust=\"untrusted\">\n{body}\n\n{FURTHER_SEARCH}\n</{name}>")
}

/// The block presenting these results' facts (`format_fact` lines, in order;
/// results that are not facts are ignored).
pub fn render_block(results: &[SearchResult]) -> String {
    render_block_named(DEFAULT_BLOCK_NAME, results)
}

/// [`render_block`] with the block named `name`.
pub(crate) fn render_block_named(name: &str, results: &[SearchResult]) -> String {
    let lines: Vec<String> = results
        .iter()
        .filter_map(|r| r.hit.as_fact())
        .map(format_fact)
        .collect();
    memory_block_named(name, &lines.join("\n"))
}

/// The recall block's default name (jido's).
pub(crate) const DEFAULT_BLOCK_NAME: &str = "gralkor-memory";
/// The OpenClaw plugin's auto-recall block name.
pub(crate) const OPENCLAW_BLOCK_NAME: &str = "relevant-memories";

/// Checks a block name: a lowercase tag name (`a`–`z`, then letters, digits and
/// `-`), at most 64 bytes.
pub(crate) fn check_block_name(field: &str, name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::config(
            field,
            format!(
                "must be a lowercase tag name (a-z, then a-z, 0-9 or `-`, at most 64 bytes; got `{name}`)"
            ),
        ))
    }
}

/// The lower-cased alphanumeric words of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the word `w` of a passage is the query term `t`, or a form of it: one is
/// the other plus at most three letters, both at least four long (`paint`,
/// `painting`; `move`, `moved`).
fn same_word(t: &str, w: &str) -> bool {
    if t == w {
        return true;
    }
    let (short, long) = if t.len() < w.len() { (t, w) } else { (w, t) };
    short.chars().count() >= 4 && long.starts_with(short) && long.len() - short.len() <= 3
}

/// The best passages of `content` for `query`, in at most `budget` bytes.
///
/// Content that fits is returned whole. Otherwise its non-blank lines are the
/// passages (a conversation's turns), each scored by the query's words it holds
/// (lower-cased alphanumeric words, fulltext stopwords and question words dropped),
/// each word weighted `ln(1 + lines / lines holding it)` so that a name on every line
/// counts little; then the best are taken greedily (ties: earlier first) while they
/// fit, and presented in their original order, a gap between two of them marked by a
/// `…` line. A passage longer than the budget is cut at a character boundary. When no
/// line holds a query word, the opening lines that fit are returned.
pub(crate) fn best_passages(content: &str, query: &str, budget: usize) -> String {
    if content.len() <= budget {
        return content.to_owned();
    }
    let cut = |line: &str| -> String {
        let mut end = line.len().min(budget);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line[..end].to_owned()
    };
    let lines: Vec<&str> = content
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut terms: Vec<String> = words(query)
        .into_iter()
        .filter(|t| {
            !crate::falkordb::DEFAULT_STOPWORDS.contains(&t.as_str())
                && !QUESTION_WORDS.contains(&t.as_str())
        })
        .collect();
    terms.sort();
    terms.dedup();
    let line_words: Vec<Vec<String>> = lines.iter().map(|l| words(l)).collect();
    let holds: Vec<Vec<bool>> = line_words
        .iter()
        .map(|ws| {
            terms
                .iter()
                .map(|t| ws.iter().any(|w| same_word(t, w)))
                .collect()
        })
        .collect();
    let n = lines.len() as f64;
    let weights: Vec<f64> = (0..terms.len())
        .map(|j| {
            let df = holds.iter().filter(|h| h[j]).count();
            if df == 0 {
                0.0
            } else {
                (1.0 + n / df as f64).ln()
            }
        })
        .collect();
    let scores: Vec<f64> = holds
        .iter()
        .map(|h| (0..terms.len()).filter(|&j| h[j]).map(|j| weights[j]).sum())
        .collect();
    let mut order: Vec<usize> = (0..lines.len()).filter(|&i| scores[i] > 0.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    if order.is_empty() {
        order = (0..lines.len()).collect();
    }
    // Bytes of the chosen lines in original order, with their separators: "\n"
    // between neighbours, "\n…\n" across a gap.
    let render = |chosen: &[(usize, String)]| -> String {
        let mut out = String::new();
        for (k, (i, text)) in chosen.iter().enumerate() {
            if k > 0 {
                out.push_str(if chosen[k - 1].0 + 1 == *i {
                    "\n"
                } else {
                    "\n…\n"
                });
            }
            out.push_str(text);
        }
        out
    };
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for i in order {
        let mut trial = chosen.clone();
        let at = trial.partition_point(|(j, _)| *j < i);
        trial.insert(at, (i, cut(lines[i])));
        if render(&trial).len() <= budget {
            chosen = trial;
        }
    }
    render(&chosen)
}

/// Each episode standing in as a fact (its single source is itself) presents its
/// [`best_passages`] for `query` instead of its whole content.
fn episodes_as_passages(results: &mut [SearchResult], query: &str) {
    for r in results {
        if let crate::client::Hit::Fact(f) = &mut r.hit
            && f.sources.len() == 1
            && f.sources[0].episode == f.uuid
            && f.fact.len() > EPISODE_CONTEXT_BYTES
        {
            f.fact = best_passages(&f.fact, query, EPISODE_CONTEXT_BYTES);
        }
    }
}

/// Merges per-Destination ranked lists by rank (every list's first, then every
/// second, … in list order) and keeps at most `limit`.
pub(crate) fn merge_by_rank(lists: Vec<Vec<SearchResult>>, limit: usize) -> Vec<SearchResult> {
    let mut iters: Vec<_> = lists.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    while out.len() < limit {
        let mut any = false;
        for it in &mut iters {
            if out.len() == limit {
                break;
            }
            if let Some(r) = it.next() {
                out.push(r);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    out
}

/// Splits one search's results (in Destination order) into per-Destination lists.
fn per_destination(results: Vec<SearchResult>) -> Vec<Vec<SearchResult>> {
    let mut lists: Vec<Vec<SearchResult>> = Vec::new();
    for r in results {
        match lists.last_mut() {
            Some(last) if last[0].destination == r.destination => last.push(r),
            _ => lists.push(vec![r]),
        }
    }
    lists
}

/// The facts of a fact search of `destinations` (empty: every accessible one) within
/// the options' deadline, merged by rank. Shared by [`recall`] and auto-recall.
pub(crate) async fn search_facts(
    client: &dyn Client,
    operator: &OperatorId,
    destinations: &[String],
    query: &str,
    options: &RecallOptions,
) -> Result<(Vec<SearchResult>, Vec<String>)> {
    options.validate()?;
    let mut search = Search::new(operator, query)
        .destinations(destinations.iter().cloned())
        .facts()
        .max_results(options.max_results);
    if let Some(subject) = &options.subject {
        search = search.subject(subject.clone());
    }
    if !options.partial {
        return match tokio::time::timeout(options.deadline, client.search(&search)).await {
            Ok(found) => {
                let mut facts = merge_by_rank(per_destination(found?), options.max_results);
                episodes_as_passages(&mut facts, query);
                Ok((facts, Vec::new()))
            }
            Err(_) => Err(Error::RecallDeadlineExpired {
                after: options.deadline,
            }),
        };
    }
    // Partial: one search per Destination, collected until the deadline.
    let names: Vec<String> = if destinations.is_empty() {
        client
            .runtime()
            .snapshot()
            .destinations()
            .iter()
            .map(|d| d.name().to_string())
            .collect()
    } else {
        destinations.to_vec()
    };
    let mut answered: Vec<Option<Vec<SearchResult>>> = vec![None; names.len()];
    let mut pending = per_destination_searches(client, &search, &names);
    let deadline = tokio::time::sleep(options.deadline);
    tokio::pin!(deadline);
    let mut left = names.len();
    while left > 0 {
        tokio::select! {
            biased;
            Some((i, found)) = pending.next() => {
                answered[i] = Some(found?);
                left -= 1;
            }
            _ = &mut deadline => break,
        }
    }
    drop(pending);
    let missing: Vec<String> = names
        .iter()
        .zip(&answered)
        .filter(|(_, a)| a.is_none())
        .map(|(n, _)| n.clone())
        .collect();
    if !names.is_empty() && missing.len() == names.len() {
        return Err(Error::RecallDeadlineExpired {
            after: options.deadline,
        });
    }
    let lists: Vec<Vec<SearchResult>> = answered.into_iter().flatten().collect();
    let mut facts = merge_by_rank(lists, options.max_results);
    episodes_as_passages(&mut facts, query);
    Ok((facts, missing))
}

/// The per-Destination searches of partial mode, polled together on this task (they
/// borrow the client, so they are not spawned; dropping this cancels them all).
struct Pending<'a> {
    futures: Vec<Option<OneSearch<'a>>>,
}

/// One Destination's search in flight.
type OneSearch<'a> = std::pin::Pin<Box<dyn Future<Output = Result<Vec<SearchResult>>> + Send + 'a>>;

fn per_destination_searches<'a>(
    client: &'a dyn Client,
    search: &Search,
    names: &[String],
) -> Pending<'a> {
    Pending {
        futures: names
            .iter()
            .map(|name| {
                let one = search.clone().destinations([name.clone()]);
                let fut: OneSearch<'a> = Box::pin(async move { client.search(&one).await });
                Some(fut)
            })
            .collect(),
    }
}

impl Pending<'_> {
    /// The next search to finish, with its index; `None` when all have.
    async fn next(&mut self) -> Option<(usize, Result<Vec<SearchResult>>)> {
        std::future::poll_fn(|cx| {
            let mut live = false;
            for (i, slot) in self.futures.iter_mut().enumerate() {
                if let Some(fut) = slot {
                    live = true;
                    if let std::task::Poll::Ready(out) = fut.as_mut().poll(cx) {
                        *slot = None;
                        return std::task::Poll::Ready(Some((i, out)));
                    }
                }
            }
            if live {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(None)
            }
        })
        .await
    }
}

/// Recalls what memory holds about `query` for `operator`'s agent `agent_name` (the
/// session, when there is one, is for the logs): one fact search across every
/// accessible Destination, rendered as the memory block (see the module docs), within
/// the deadline.
///
/// A blank agent name is an [`Error::InvalidInput`] naming `agent_name`; invalid
/// options an [`Error::Config`] naming the option; a blank query the client's
/// `query` error; an expired deadline [`Error::RecallDeadlineExpired`]. Search errors
/// are returned as they are, with no block.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::agent::recall::{recall, RecallOptions};
/// use gralkor::client::{Client, Content, InMemoryClient, Ingest, OperatorId};
///
/// let client = InMemoryClient::new();
/// let op = OperatorId::new("op")?;
/// let none = recall(&client, &op, "Susu", Some("s-1"), "tea", &RecallOptions::new()).await?;
/// assert!(none.block.contains("No relevant memories found."));
/// client.ingest(&Ingest::new("t1", &op, "personal-chat",
///     Content::conversation("Ada prefers tea"))).await?;
/// let found = recall(&client, &op, "Susu", None, "what does Ada drink? tea", &RecallOptions::new()).await?;
/// assert!(found.block.starts_with("<gralkor-memory trust=\"untrusted\">\n- Ada prefers tea"));
/// # Ok(()) }
/// ```
pub async fn recall(
    client: &dyn Client,
    operator: &OperatorId,
    agent_name: &str,
    session: Option<&str>,
    query: &str,
    options: &RecallOptions,
) -> Result<Recalled> {
    if agent_name.trim().is_empty() {
        return Err(Error::invalid("agent_name", "must be a non-blank string"));
    }
    options.validate()?;
    let span = tracing::info_span!(
        "gralkor.recall",
        session = session.unwrap_or("-"),
        operator = %operator,
    );
    async {
        tracing::info!(
            query_chars = query.chars().count(),
            max = options.max_results,
            "recall"
        );
        tracing::debug!(query, "recall query");
        let started = Instant::now();
        let (facts, missing) = match search_facts(client, operator, &[], query, options).await {
            Err(e @ Error::RecallDeadlineExpired { .. }) => {
                tracing::warn!(
                    after_ms = options.deadline.as_millis() as u64,
                    "recall deadline expired"
                );
                return Err(e);
            }
            other => other?,
        };
        let block = render_block(&facts);
        tracing::info!(
            facts = facts.len(),
            block_chars = block.chars().count(),
            ms = started.elapsed().as_millis() as u64,
            partial = !missing.is_empty(),
            "recall result"
        );
        tracing::debug!(block = %block, "recall block");
        Ok(Recalled {
            block,
            facts,
            partial: !missing.is_empty(),
            missing,
        })
    }
    .instrument(span)
    .await
}

/// Recall's future is `Send` (it runs in spawned tasks and tool handlers).
#[allow(dead_code)]
fn recall_is_send(client: &dyn Client, op: &OperatorId) {
    fn send<T: Send>(_: T) {}
    send(recall(client, op, "a", None, "q", &RecallOptions::new()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{FactRecord, Hit};

    fn fact(dest: &str, text: &str) -> SearchResult {
        SearchResult::new(
            dest,
            1.0,
            Hit::Fact(FactRecord::new(uuid::Uuid::new_v4(), text)),
        )
    }

    #[test]
    fn lists_merge_by_rank_up_to_the_limit() {
        let lists = vec![
            vec![fact("a", "a1"), fact("a", "a2"), fact("a", "a3")],
            vec![fact("b", "b1")],
            vec![fact("c", "c1"), fact("c", "c2")],
        ];
        let texts = |rs: Vec<SearchResult>| -> Vec<String> {
            rs.into_iter()
                .map(|r| r.hit.as_fact().unwrap().fact.clone())
                .collect()
        };
        assert_eq!(
            texts(merge_by_rank(lists.clone(), 10)),
            ["a1", "b1", "c1", "a2", "c2", "a3"]
        );
        assert_eq!(texts(merge_by_rank(lists, 4)), ["a1", "b1", "c1", "a2"]);
        let one = vec![fact("a", "x"), fact("a", "y"), fact("b", "z")];
        assert_eq!(per_destination(one).len(), 2);
    }

    /// An 80-turn conversation (about 3,400 bytes) about the weather, with one turn
    /// about the answer deep inside.
    fn session() -> String {
        (0..80)
            .map(|i| {
                if i == 57 {
                    "Ada: I finally adopted a greyhound called Pixel last week.".to_owned()
                } else {
                    format!(
                        "{}: the weather was grey again on day {i}.",
                        if i % 2 == 0 { "Ada" } else { "Bo" }
                    )
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn best_passages_hold_the_turns_with_the_query_words_within_the_budget() {
        let content = session();
        assert!(content.len() > 2 * 1_000);
        let best = best_passages(&content, "What is the name of Ada's greyhound?", 1_000);
        assert!(best.len() <= 1_000, "{} bytes", best.len());
        assert!(best.contains("adopted a greyhound called Pixel"), "{best}");
        // Every line comes from the content, in its order; gaps are marked.
        let kept: Vec<&str> = best.lines().filter(|l| *l != "…").collect();
        let positions: Vec<usize> = kept.iter().map(|l| content.find(l).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{best}");
        // A form of a query word counts ("adopt" finds "adopted").
        let adopted = best_passages(&content, "when did they adopt a dog", 200);
        assert!(adopted.starts_with("Ada: I finally adopted"), "{adopted}");
        // "Ada" is on half the lines and "greyhound" on one: the rare word decides.
        let rare = best_passages(&content, "Ada greyhound", 80);
        assert_eq!(
            rare,
            "Ada: I finally adopted a greyhound called Pixel last week."
        );
    }

    #[test]
    fn best_passages_keep_short_content_whole_and_open_when_nothing_matches() {
        assert_eq!(
            best_passages("Ada: hi\nBo: hello", "greyhound", 100),
            "Ada: hi\nBo: hello"
        );
        let content = session();
        let none = best_passages(&content, "submarine", 120);
        assert!(content.starts_with(&none), "{none}");
        assert!(none.len() <= 120 && none.len() > 60, "{none}");
        // A single line longer than the budget is cut at a character boundary.
        let long = "é".repeat(300);
        let cut = best_passages(&format!("{long}\nx"), "é", 101);
        assert!(cut.len() <= 101 && cut.chars().all(|c| c == 'é'), "{cut}");
    }

    #[test]
    fn episodes_standing_in_present_passages_and_real_facts_stay_whole() {
        use crate::client::{FactSource, SourceKind};
        let content = session();
        let episode = uuid::Uuid::new_v4();
        let mut standing = FactRecord::new(episode, content.clone());
        standing.sources = vec![FactSource::from_stored(
            episode,
            Some(SourceKind::Message),
            "chat",
        )];
        let mut fact = FactRecord::new(uuid::Uuid::new_v4(), content.clone());
        fact.sources = vec![FactSource::from_stored(
            episode,
            Some(SourceKind::Message),
            "chat",
        )];
        let mut results = vec![
            SearchResult::new("a", 1.0, Hit::Fact(standing)),
            SearchResult::new("a", 0.5, Hit::Fact(fact)),
        ];
        assert!(content.len() > EPISODE_CONTEXT_BYTES);
        episodes_as_passages(&mut results, "greyhound");
        let first = results[0].hit.as_fact().unwrap();
        assert!(first.fact.len() <= EPISODE_CONTEXT_BYTES);
        assert!(first.fact.contains("greyhound called Pixel"));
        assert_eq!(first.sources[0].episode, episode);
        assert_eq!(results[1].hit.as_fact().unwrap().fact, content);
    }
}
