//! Agent glue: what an agent's tools call.
//!
//! * [`memory_search`] — the `memory_search` tool: one fact search with the caller's
//!   selectors, presented as budgeted readable text ([`format::present_facts`]).
//! * [`format`](mod@format) — that presentation, and [`format_fact`](format::format_fact) lines
//!   with timestamps and sources.
//!
//! Capture, recall, distillation and the `memory_add` tool come in later releases.

pub mod format;

use crate::client::{Client, Search};
use crate::{Error, Result};

/// The text `memory_search` returns for a blank query: no search ran.
pub const BLANK_QUERY_NON_RESULT: &str = "No query was provided, so no memory search was run. \
     This is a non-result: it says nothing about what is or is not remembered.";

/// One `memory_search` tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySearch {
    /// The operator (from the tool context, never from the model).
    pub operator_id: String,
    /// The model's query.
    pub query: String,
    /// Optional Destination selector.
    pub destinations: Vec<String>,
    /// Optional Lens selector.
    pub lenses: Vec<String>,
    /// Budget of the serialised tool envelope (default
    /// [`format::DEFAULT_MAX_BYTES`]); must be positive.
    pub max_bytes: usize,
}

impl MemorySearch {
    /// A call over every accessible Destination with the default budget.
    pub fn new(operator_id: impl Into<String>, query: impl Into<String>) -> MemorySearch {
        MemorySearch {
            operator_id: operator_id.into(),
            query: query.into(),
            destinations: Vec::new(),
            lenses: Vec::new(),
            max_bytes: format::DEFAULT_MAX_BYTES,
        }
    }
}

/// Runs the `memory_search` tool: checks the budget, answers a blank query with
/// [`BLANK_QUERY_NON_RESULT`] without searching (and logs a warning), otherwise runs
/// exactly one fact search with the selectors and returns the readable presentation.
/// Search errors are returned as they are.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::agent::{memory_search, MemorySearch};
/// use gralkor::client::{Client, Content, InMemoryClient, Ingest};
///
/// let client = InMemoryClient::new();
/// client.ingest(&Ingest::new("t1", "op", "personal-chat",
///     Content::conversation("Ada prefers tea"))).await?;
/// let text = memory_search(&client, &MemorySearch::new("op", "what does Ada prefer?")).await?;
/// assert_eq!(text, "Lens: personal-chat\n- Ada prefers tea");
/// # Ok(()) }
/// ```
pub async fn memory_search(client: &dyn Client, call: &MemorySearch) -> Result<String> {
    if call.max_bytes == 0 {
        return Err(Error::invalid(
            "memory_search_max_bytes",
            "must be a positive integer",
        ));
    }
    if call.query.trim().is_empty() {
        tracing::warn!("memory_search called with a blank query; no search was run");
        return Ok(BLANK_QUERY_NON_RESULT.to_string());
    }
    let results = client
        .search(
            &Search::new(&call.operator_id, &call.query)
                .destinations(call.destinations.iter().cloned())
                .lenses(call.lenses.iter().cloned())
                .facts(),
        )
        .await?;
    format::present_facts(&results, call.max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Call, Content, InMemoryClient, Ingest, ResultType};

    #[tokio::test]
    async fn a_blank_query_is_a_non_result_without_a_search() {
        let client = InMemoryClient::new();
        let text = memory_search(&client, &MemorySearch::new("op", "  "))
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
                "op",
                "personal-chat",
                Content::conversation("Ada: tea"),
            ))
            .await
            .unwrap();
        let mut call = MemorySearch::new("op", "tea");
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
        let none = memory_search(&client, &MemorySearch::new("op", "coffee"))
            .await
            .unwrap();
        assert_eq!(none, "No matching facts.");
    }

    #[tokio::test]
    async fn budget_errors_come_before_the_search_and_search_errors_pass_through() {
        let client = InMemoryClient::new();
        let mut call = MemorySearch::new("op", "tea");
        call.max_bytes = 0;
        let err = memory_search(&client, &call).await.unwrap_err();
        assert!(err.to_string().contains("memory_search_max_bytes"));
        assert!(client.calls().is_empty());
        let mut call = MemorySearch::new("op", "tea");
        call.destinations = vec!["nowhere".into()];
        let err = memory_search(&client, &call).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { ref field, .. } if field == "destinations[0]"));
    }
}
