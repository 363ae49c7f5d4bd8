//! Agent glue: what an agent's tools call.
//!
//! * [`memory_search`] — the `memory_search` tool: one fact search with the caller's
//!   selectors, presented as budgeted readable text (`format::present_facts`).
//! * [`format`](mod@format) — that presentation, and `format_fact` lines
//!   with timestamps and sources.
//! * [`turn`] — the canonical turn (user / behaviour / assistant) and converters from
//!   OpenAI-style chat messages.
//! * [`transcript`] — the transcript episode, with recalled memory left out.
//! * [`capture`] — the durable capture buffer.
//! * [`recall`](mod@recall) — recall within a deadline, as the untrusted memory block.
//! * [`tools`] — the memory tools as tool definitions, their handlers, and the
//!   first-iteration `tool_choice` helper.
//! * [`hooks`] — auto-recall before a turn ([`hooks::AgentRecall::before_turn`]) and
//!   auto-capture after it ([`hooks::AgentCapture::after_turn`]).
//! * [`rotation`] — context rotation: flush and await a session, seed the new context.
//! * `rig` (feature `rig`) — the adapter for rig agents: the memory tools as rig
//!   tools, rig messages as turns, and a rig hook that recalls and captures.

pub mod capture;
pub mod format;
pub mod hooks;
pub mod openclaw;
pub mod recall;
#[cfg(feature = "rig")]
pub mod rig;
pub mod rotation;
pub mod tools;
pub mod transcript;
pub mod turn;

pub use hooks::{AgentCapture, AgentRecall, AutoCapture, AutoRecall};
pub use recall::{RecallOptions, Recalled, recall};
pub use tools::{ToolContext, ToolDefinition, call_tool, force_memory_search_on_first_iteration};

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::access::Subject;
use crate::client::{Client, OperatorId, Search};

internal_item!(
    /// The text `memory_search` returns for a blank query: no search ran.
    pub const BLANK_QUERY_NON_RESULT: &str = "No query was provided, so no memory search was run. \
     This is a non-result: it says nothing about what is or is not remembered.";
);

/// One `memory_search` tool call, built like the other requests: a constructor with
/// what is required, builder methods for the rest. Serialisable, so a tool call's
/// JSON arguments (with the operator added from the tool context) read straight into
/// it; omitted selectors and budget take their defaults.
///
/// ```
/// use gralkor::agent::MemorySearch;
/// use gralkor::client::OperatorId;
///
/// let call = MemorySearch::new(OperatorId::new("op")?, "where does Ada work?")
///     .destinations(["personal"])
///     .lenses(["personal-chat"])
///     .max_bytes(2_000);
/// let json = serde_json::to_string(&call).unwrap();
/// assert_eq!(serde_json::from_str::<MemorySearch>(&json).unwrap(), call);
/// let minimal: MemorySearch =
///     serde_json::from_str(r#"{"operator_id": "op", "query": "Ada"}"#).unwrap();
/// assert_eq!(minimal.max_bytes, gralkor::agent::format::DEFAULT_MAX_BYTES);
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemorySearch {
    /// The operator (from the tool context, never from the model).
    pub operator_id: OperatorId,
    /// The model's query.
    pub query: String,
    /// Optional Destination selector.
    #[serde(default)]
    pub destinations: Vec<String>,
    /// Optional Lens selector.
    #[serde(default)]
    pub lenses: Vec<String>,
    /// Budget of the serialised tool envelope (default
    /// `format::DEFAULT_MAX_BYTES`); every answer fits it (see [`memory_search`]).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// Who is asking, for a client with an authorizer (from the tool context, never
    /// from the model; see [`Search::subject`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// What was true at this instant instead of what is current (see
    /// [`Search::as_of`](crate::client::Search#structfield.as_of)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<crate::graph::Timestamp>,
}

fn default_max_bytes() -> usize {
    format::DEFAULT_MAX_BYTES
}

impl MemorySearch {
    /// A call over every accessible Destination with the default budget.
    pub fn new(operator: impl Into<OperatorId>, query: impl Into<String>) -> MemorySearch {
        MemorySearch {
            operator_id: operator.into(),
            query: query.into(),
            destinations: Vec::new(),
            lenses: Vec::new(),
            max_bytes: format::DEFAULT_MAX_BYTES,
            subject: None,
            as_of: None,
        }
    }

    /// Who is asking (needed by a client with an authorizer).
    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// Only these Destinations.
    pub fn destinations<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.destinations = names.into_iter().map(Into::into).collect();
        self
    }

    /// Only episodes' facts written by these Lenses.
    pub fn lenses<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.lenses = names.into_iter().map(Into::into).collect();
        self
    }

    /// The budget of the serialised tool envelope.
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }
}

/// Runs the `memory_search` tool: answers a blank query with `BLANK_QUERY_NON_RESULT`
/// without searching (and logs a warning), otherwise runs exactly one fact search with
/// the selectors and returns the readable presentation. Search errors are returned as
/// they are.
///
/// **Every answer fits the budget**: the serialised envelope of any text returned —
/// the blank-query non-result, `No matching facts.`, facts — is at most
/// `call.max_bytes` bytes. A budget too small for the answer is
/// [`Error::BudgetTooSmall`](crate::Error::BudgetTooSmall) carrying the least budget that could do: for a blank query
/// the non-result's size; before a search (no search runs when the budget cannot hold
/// even `NO_MATCHING_FACTS`) the size of that shortest
/// answer; after it, the size of the shortest complete presentation of what was found.
/// A budget of zero is just the smallest budget too small.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::agent::{memory_search, MemorySearch};
/// use gralkor::client::{Client, Content, InMemoryClient, Ingest, OperatorId};
///
/// let client = InMemoryClient::new();
/// let op = OperatorId::new("op")?;
/// client.ingest(&Ingest::new("t1", &op, "personal-chat",
///     Content::conversation("Ada prefers tea"))).await?;
/// let text = memory_search(&client, &MemorySearch::new(&op, "what does Ada prefer?")).await?;
/// assert_eq!(text, "Lens: personal-chat\n- Ada prefers tea");
/// # Ok(()) }
/// ```
pub async fn memory_search(client: &dyn Client, call: &MemorySearch) -> Result<String> {
    if call.query.trim().is_empty() {
        tracing::warn!("memory_search called with a blank query; no search was run");
        return format::within_budget(BLANK_QUERY_NON_RESULT, call.max_bytes);
    }
    // No search can answer in fewer bytes than "No matching facts.".
    format::within_budget(format::NO_MATCHING_FACTS, call.max_bytes)?;
    let mut search = Search::new(&call.operator_id, &call.query)
        .destinations(call.destinations.iter().cloned())
        .lenses(call.lenses.iter().cloned())
        .facts();
    if let Some(subject) = &call.subject {
        search = search.subject(subject.clone());
    }
    if let Some(t) = call.as_of {
        search = search.as_of(t);
    }
    let results = client.search(&search).await?;
    format::present_facts(&results, call.max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use crate::client::{Call, Content, InMemoryClient, Ingest, ResultType};

    fn oid(id: &str) -> OperatorId {
        OperatorId::new(id).unwrap()
    }

    #[tokio::test]
    async fn a_blank_query_is_a_non_result_without_a_search() {
        let client = InMemoryClient::new();
        let text = memory_search(&client, &MemorySearch::new(oid("op"), "  "))
            .await
            .unwrap();
        assert!(text.contains("No query was provided") && text.contains("non-result"));
        assert!(client.calls().is_empty());
    }

    #[tokio::test]
    async fn one_fact_search_with_the_selectors_and_readable_text() {
        let client = InMemoryClient::new();
        client
            .ingest(&Ingest::new(
                "t",
                oid("op"),
                "personal-chat",
                Content::conversation("Ada: tea"),
            ))
            .await
            .unwrap();
        let mut call = MemorySearch::new(oid("op"), "tea");
        call.destinations = vec!["personal".into()];
        call.lenses = vec!["personal-chat".into()];
        let text = memory_search(&client, &call).await.unwrap();
        assert_eq!(text, "Lens: personal-chat\n- Ada: tea");
        let searches: Vec<_> = client
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Search(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(searches.len(), 1);
        assert_eq!(searches[0].destinations, ["personal"]);
        assert_eq!(searches[0].lenses, ["personal-chat"]);
        assert_eq!(
            searches[0].result_type,
            ResultType::Facts { edge_types: vec![] }
        );
        let none = memory_search(&client, &MemorySearch::new(oid("op"), "coffee"))
            .await
            .unwrap();
        assert_eq!(none, "No matching facts.");
    }

    #[tokio::test]
    async fn budget_errors_come_before_the_search_and_search_errors_pass_through() {
        let client = InMemoryClient::new();
        let mut call = MemorySearch::new(oid("op"), "tea");
        call.max_bytes = 0;
        let err = memory_search(&client, &call).await.unwrap_err();
        assert!(
            matches!(err, Error::BudgetTooSmall { max_bytes: 0, .. }),
            "{err:?}"
        );
        assert!(client.calls().is_empty());
        let mut call = MemorySearch::new(oid("op"), "tea");
        call.destinations = vec!["nowhere".into()];
        let err = memory_search(&client, &call).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { ref field, .. } if field == "destinations[0]"));
    }

    #[tokio::test]
    async fn every_response_fits_its_budget_or_is_budget_too_small() {
        let client = InMemoryClient::new();
        client
            .ingest(&Ingest::new(
                "t",
                oid("op"),
                "personal-chat",
                Content::conversation("Ada: tea"),
            ))
            .await
            .unwrap();
        let call = |query: &str, max_bytes| MemorySearch {
            max_bytes,
            ..MemorySearch::new(oid("op"), query)
        };
        let blank = format::envelope_bytes(BLANK_QUERY_NON_RESULT);
        let none = format::envelope_bytes(format::NO_MATCHING_FACTS);
        let everything = format::envelope_bytes("Lens: personal-chat\n- Ada: tea");
        let notice = format::envelope_bytes("Omitted facts: 1 (response limit).");
        let searches = || {
            client
                .calls()
                .iter()
                .filter(|c| matches!(c, Call::Search(_)))
                .count()
        };
        // Budgets too small for anything: the error carries the least budget that
        // could do (for a search not yet run: the shortest answer any search gives),
        // and no search runs.
        for max_bytes in [0, 1, 40] {
            for (query, minimum) in [("  ", blank), ("coffee", none), ("tea", none)] {
                match memory_search(&client, &call(query, max_bytes)).await {
                    Err(Error::BudgetTooSmall {
                        max_bytes: m,
                        minimum_bytes,
                    }) => assert_eq!((m, minimum_bytes), (max_bytes, minimum), "{query:?}"),
                    other => panic!("{query:?} within {max_bytes} bytes: {other:?}"),
                }
            }
        }
        assert_eq!(searches(), 0);
        // A budget for the shortest answer: what the search found decides.
        assert_eq!(
            memory_search(&client, &call("coffee", none)).await.unwrap(),
            format::NO_MATCHING_FACTS
        );
        match memory_search(&client, &call("tea", none)).await {
            Err(Error::BudgetTooSmall { minimum_bytes, .. }) => {
                assert_eq!(minimum_bytes, everything.min(notice))
            }
            other => panic!("{other:?}"),
        }
        let text = memory_search(&client, &call("tea", everything.min(notice)))
            .await
            .unwrap();
        assert!(
            format::envelope_bytes(&text) <= everything.min(notice),
            "{text}"
        );
        assert_eq!(
            memory_search(&client, &call(" ", blank)).await.unwrap(),
            BLANK_QUERY_NON_RESULT
        );
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Whatever was remembered, whatever the query and the budget: the answer fits
        /// the budget, or the error says the budget is too small and names a minimum
        /// that is honest (asking again with it makes progress, and soon succeeds).
        #[test]
        fn memory_search_never_answers_beyond_its_budget(
            texts in proptest::collection::vec("[a-z \"\\\\\n\u{e9}\u{1f600}]{0,40}", 0..6),
            query in proptest::prop_oneof![
                proptest::strategy::Just(String::new()),
                proptest::strategy::Just(" \t\n".to_string()),
                proptest::strategy::Just("tea".to_string()),
                proptest::strategy::Just("coffee".to_string()),
                "[a-z ]{1,12}",
            ],
            max_bytes in 0usize..600,
        ) {
            rt().block_on(async {
                let client = InMemoryClient::new();
                for (i, text) in texts.iter().enumerate() {
                    client
                        .ingest(&Ingest::new(
                            format!("t{i}"),
                            oid("op"),
                            "personal-chat",
                            Content::document(format!("tea {text}")),
                        ))
                        .await
                        .unwrap();
                }
                let mut budget = max_bytes;
                for _ in 0..3 {
                    let call = MemorySearch {
                        max_bytes: budget,
                        ..MemorySearch::new(oid("op"), query.as_str())
                    };
                    match memory_search(&client, &call).await {
                        Ok(text) => {
                            proptest::prop_assert!(format::envelope_bytes(&text) <= budget);
                            proptest::prop_assert!(text.chars().count() <= format::MAX_TEXT_CHARS);
                            return Ok(());
                        }
                        Err(Error::BudgetTooSmall { max_bytes, minimum_bytes }) => {
                            proptest::prop_assert_eq!(max_bytes, budget);
                            proptest::prop_assert!(minimum_bytes > budget);
                            budget = minimum_bytes;
                        }
                        Err(other) => proptest::prop_assert!(false, "{other:?}"),
                    }
                }
                proptest::prop_assert!(false, "no answer within the minimum after 3 tries");
                Ok(())
            })?;
        }
    }
}
