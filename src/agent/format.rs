//! Readable presentations of search results: `memory_search`'s budgeted text and
//! `format_fact` lines.
//!
//! `present_facts` turns fact results into one readable text for a model:
//!
//! ```text
//! Lens: jira
//! - Payment retries must use an idempotency key.
//! - The settlement worker retries failed requests three times.
//!
//! Reflection: generalisations
//! - Prefer small, reversible deployments with monitoring.
//! ```
//!
//! * Facts are grouped under one heading per source (`heading`): `Lens: <name>`,
//!   `Reflection: <name>`, `Source: direct conversation` / `document` /
//!   `structured record`, `Source: direct` (no recorded kind) and `Source: unknown`
//!   (no attributable writer). A fact with several distinct sources appears under each.
//!   Groups come in order of first appearance; facts keep retrieval order.
//! * Bullets are the fact text only: no Destination, ids or times.
//! * Budget: the whole text is at most `MAX_TEXT_CHARS` characters, and the
//!   serialised tool envelope `{"ok":true,"result":{"result":<text>}}` at most
//!   `max_bytes` UTF-8 bytes (default `DEFAULT_MAX_BYTES`). Whole facts only: when
//!   not everything fits, facts are kept greedily in retrieval order (a later fact
//!   that fits is still kept; an oversized one is skipped whole) and the text ends with
//!   `Omitted facts: N (response limit).`, N counting input facts.
//! * No facts: `No matching facts.` A budget that cannot hold the shortest complete
//!   response (everything, when that is shorter than the omission notice alone) is
//!   [`Error::BudgetTooSmall`] carrying that minimum; zero is simply the smallest such
//!   budget.
//!
//! ```
//! use gralkor::agent::format::{present_facts, DEFAULT_MAX_BYTES};
//! use gralkor::client::{FactRecord, FactSource, Hit, SearchResult, SourceKind};
//!
//! let fact = |text: &str, description: &str| {
//!     let mut fact = FactRecord::new(uuid::Uuid::new_v4(), text);
//!     fact.sources = vec![FactSource::from_stored(uuid::Uuid::new_v4(),
//!         Some(SourceKind::Text), description)];
//!     SearchResult::new("global", 1.0, Hit::Fact(fact))
//! };
//! let results = [
//!     fact("Payment retries use an idempotency key.", "PAY-1 [lens: jira]"),
//!     fact("Ada prefers tea.", "manual [gralkor: direct]"),
//! ];
//! let text = present_facts(&results, DEFAULT_MAX_BYTES)?;
//! assert_eq!(text, "Lens: jira\n- Payment retries use an idempotency key.\n\n\
//!                   Source: direct document\n- Ada prefers tea.");
//! assert_eq!(present_facts(&[], DEFAULT_MAX_BYTES)?, "No matching facts.");
//! # Ok::<(), gralkor::Error>(())
//! ```

use crate::client::{FactRecord, FactSource, Hit, SearchResult, SourceKind};
use crate::graph::Timestamp;
use crate::provenance::Writer;
use crate::{Error, Result};

internal_item!(
    /// The default budget of the serialised tool envelope, in UTF-8 bytes.
    pub const DEFAULT_MAX_BYTES: usize = 65_536;
);
/// The most characters the text may have, headings and notices included.
pub(crate) const MAX_TEXT_CHARS: usize = 16_384;
internal_item!(
    /// The text for a search that found no facts.
    pub const NO_MATCHING_FACTS: &str = "No matching facts.";
);

/// The heading a source groups its facts under.
pub(crate) fn heading(source: &FactSource) -> String {
    match &source.writer {
        Some(Writer::Lens(name)) => format!("Lens: {name}"),
        Some(Writer::Reflection(name)) => format!("Reflection: {name}"),
        Some(Writer::Direct) => match source.source_kind {
            Some(SourceKind::Message) => "Source: direct conversation".into(),
            Some(SourceKind::Text) => "Source: direct document".into(),
            Some(SourceKind::Json) => "Source: direct structured record".into(),
            None => "Source: direct".into(),
        },
        None => "Source: unknown".into(),
    }
}

/// The distinct headings of one fact, in source order (`Source: unknown` when it has
/// no sources).
fn headings(fact: &FactRecord) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in fact.sources.iter().map(heading) {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    if out.is_empty() {
        out.push(heading(&FactSource::from_stored(
            uuid::Uuid::nil(),
            None,
            "",
        )));
    }
    out
}

internal_item!(
    /// The serialised size of the tool envelope carrying `text`, in bytes.
    pub fn envelope_bytes(text: &str) -> usize {
        serde_json::json!({"ok": true, "result": {"result": text}})
            .to_string()
            .len()
    }
);

fn omitted_notice(n: usize) -> String {
    format!("Omitted facts: {n} (response limit).")
}

fn render(facts: &[(&FactRecord, Vec<String>)], kept: &[usize], omitted: usize) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for &i in kept {
        let (fact, hs) = &facts[i];
        for h in hs {
            match groups.iter_mut().find(|(g, _)| g == h) {
                Some((_, bullets)) => bullets.push(&fact.fact),
                None => groups.push((h, vec![&fact.fact])),
            }
        }
    }
    let mut sections: Vec<String> = groups
        .into_iter()
        .map(|(h, bullets)| {
            let mut s = h.to_string();
            for b in bullets {
                s.push_str("\n- ");
                s.push_str(b);
            }
            s
        })
        .collect();
    if omitted > 0 {
        sections.push(omitted_notice(omitted));
    }
    sections.join("\n\n")
}

fn fits(text: &str, max_bytes: usize) -> bool {
    text.chars().count() <= MAX_TEXT_CHARS && envelope_bytes(text) <= max_bytes
}

internal_item!(
    /// `text` when its envelope fits `max_bytes` (and it is within `MAX_TEXT_CHARS`),
    /// else [`Error::BudgetTooSmall`] with the envelope's size as the minimum.
    ///
    /// ```
    /// use gralkor::agent::format::{envelope_bytes, within_budget, NO_MATCHING_FACTS};
    ///
    /// let needed = envelope_bytes(NO_MATCHING_FACTS);
    /// assert_eq!(within_budget(NO_MATCHING_FACTS, needed)?, NO_MATCHING_FACTS);
    /// assert!(matches!(within_budget(NO_MATCHING_FACTS, needed - 1),
    ///     Err(gralkor::Error::BudgetTooSmall { minimum_bytes, .. }) if minimum_bytes == needed));
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn within_budget(text: &str, max_bytes: usize) -> Result<String> {
        if fits(text, max_bytes) {
            Ok(text.to_string())
        } else {
            Err(Error::BudgetTooSmall {
                max_bytes,
                minimum_bytes: envelope_bytes(text),
            })
        }
    }
);

internal_item!(
    /// Presents the fact results within the budget (see the module docs). Results that
    /// are not facts are ignored.
    pub fn present_facts(results: &[SearchResult], max_bytes: usize) -> Result<String> {
        let facts: Vec<(&FactRecord, Vec<String>)> = results
            .iter()
            .filter_map(|r| match &r.hit {
                Hit::Fact(f) => Some((f, headings(f))),
                _ => None,
            })
            .collect();
        if facts.is_empty() {
            return within_budget(NO_MATCHING_FACTS, max_bytes);
        }
        let n = facts.len();
        let all: Vec<usize> = (0..n).collect();
        let everything = render(&facts, &all, 0);
        if fits(&everything, max_bytes) {
            return Ok(everything);
        }
        let minimal = render(&facts, &[], n);
        if !fits(&minimal, max_bytes) {
            // The least budget that could do: the notice alone, or everything when that
            // is shorter (and within the character limit).
            let mut minimum_bytes = envelope_bytes(&minimal);
            if everything.chars().count() <= MAX_TEXT_CHARS {
                minimum_bytes = minimum_bytes.min(envelope_bytes(&everything));
            }
            return Err(Error::BudgetTooSmall {
                max_bytes,
                minimum_bytes,
            });
        }
        let mut kept: Vec<usize> = Vec::new();
        for i in 0..n {
            kept.push(i);
            if !fits(&render(&facts, &kept, n - kept.len()), max_bytes) {
                kept.pop();
            }
        }
        Ok(render(&facts, &kept, n - kept.len()))
    }
);

internal_item!(
    /// A timestamp as fact lines show it ([`Timestamp::to_fact_text`]).
    pub fn format_timestamp(at: Timestamp) -> String {
        at.to_fact_text()
    }
);

internal_item!(
    /// One fact as a readable line: `- <fact>`, then ` (created …)`, ` (valid from …)`,
    /// ` (invalid since …)`, ` (expired …)` for the times it has, then one
    /// ` (source: <kind> — <description>; episode: <uuid>)` per source, the description
    /// keeping a Lens's or a Reflection's provenance marker
    /// ([`FactSource::source_description`](crate::client::FactSource::source_description)).
    ///
    /// ```
    /// use gralkor::agent::format::format_fact;
    /// use gralkor::client::{FactRecord, FactSource, SourceKind};
    /// use gralkor::graph::Timestamp;
    ///
    /// let episode = uuid::Uuid::nil();
    /// let mut fact = FactRecord::new(uuid::Uuid::nil(), "Ada prefers tea.");
    /// fact.created_at = Some("2024-05-01T12:00:00.123Z".parse::<Timestamp>().unwrap());
    /// fact.sources = vec![FactSource::from_stored(episode, Some(SourceKind::Message), "chat [lens: personal-chat]")];
    /// assert_eq!(
    ///     format_fact(&fact),
    ///     "- Ada prefers tea. (created 2024-05-01T12:00:00+0) \
    ///      (source: conversation — chat [lens: personal-chat]; episode: 00000000-0000-0000-0000-000000000000)"
    /// );
    /// ```
    pub fn format_fact(fact: &FactRecord) -> String {
        let mut line = format!("- {}", fact.fact);
        for (label, at) in [
            ("created", fact.created_at),
            ("valid from", fact.valid_at),
            ("invalid since", fact.invalid_at),
            ("expired", fact.expired_at),
        ] {
            if let Some(at) = at {
                line.push_str(&format!(" ({label} {})", format_timestamp(at)));
            }
        }
        for s in &fact.sources {
            let kind = s
                .source_kind
                .map(|k| format!("{} — ", kind_name(k)))
                .unwrap_or_default();
            line.push_str(&format!(
                " (source: {kind}{}; episode: {})",
                s.source_description, s.episode
            ));
        }
        line
    }
);

/// How a source kind reads to an agent: `conversation`, `document`, `structured_record`.
fn kind_name(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Message => "conversation",
        SourceKind::Text => "document",
        SourceKind::Json => "structured_record",
    }
}

/// Fact lines joined with newlines; empty for no facts. Results that are not facts
/// are ignored.
#[cfg(test)]
pub(crate) fn format_facts(results: &[SearchResult]) -> String {
    results
        .iter()
        .filter_map(|r| r.hit.as_fact())
        .map(format_fact)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
