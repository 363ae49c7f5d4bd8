//! From turns to the transcript episode, with recalled memory left out.
//!
//! [`format_transcript`] renders turns exactly as the seed's Distill does: each user
//! message as `<human name>: <content>`, each assistant message as `<agent name>:
//! <content>`, behaviour dropped (no reasoning or tool output enters the graph); a
//! turn's lines joined with `\n`, empty turns skipped, turns joined with `\n`. Both
//! names are required and a blank one is an error naming it: there is deliberately no
//! generic `User`, which would merge every human into one node of the graph.
//!
//! **Recalled memory never comes back in as new memory.** Before a turn is captured,
//! [`MemoryFilter::scrub`] drops:
//!
//! * every injected memory block — the recall block
//!   `<gralkor-memory …>…</gralkor-memory>` ([`MEMORY_BLOCK_OPEN`] …
//!   [`MEMORY_BLOCK_CLOSE`]) and any further block configured with
//!   [`MemoryFilter::block`] (an auto-recall block such as
//!   `<relevant-memories>…</relevant-memories>`) — wherever it appears in a user or
//!   assistant message; an opening marker with no closing one drops the rest of the
//!   message; a message left blank is dropped;
//! * the results of `memory_search` tool calls ([`MEMORY_SEARCH_TOOL`]): the behaviour
//!   line `tool memory_search → …` keeps only `tool memory_search`.
//!
//! ```
//! use gralkor::agent::transcript::{format_transcript, MemoryFilter};
//! use gralkor::agent::turn::Turn;
//!
//! let turn = Turn::completed(
//!     "<gralkor-memory trust=\"untrusted\">\n- Ada likes tea\n</gralkor-memory>\nWhat should I bring Ada?",
//!     ["tool memory_search → - Ada likes tea"],
//!     "Bring her some tea.",
//! );
//! let turn = MemoryFilter::new().scrub(&turn);
//! assert_eq!(
//!     format_transcript(&[turn], "Susu", "Sam")?,
//!     "Sam: What should I bring Ada?\nSusu: Bring her some tea."
//! );
//! # Ok::<(), gralkor::Error>(())
//! ```

use serde::{Deserialize, Serialize};

use super::turn::{Message, Role, Turn};
use crate::{Error, Result};

/// The opening marker of the memory block recall injects (the tag is left open:
/// attributes such as `trust="untrusted"` follow).
pub const MEMORY_BLOCK_OPEN: &str = "<gralkor-memory";
/// The closing marker of the memory block recall injects.
pub const MEMORY_BLOCK_CLOSE: &str = "</gralkor-memory>";
/// The tool whose results are recalled memory.
pub const MEMORY_SEARCH_TOOL: &str = "memory_search";

/// Whether `text` (surrounding whitespace aside) is one injected memory block, from
/// `<gralkor-memory` (followed by `>` or whitespace) to `</gralkor-memory>`.
///
/// ```
/// use gralkor::agent::transcript::is_memory_block;
///
/// assert!(is_memory_block("<gralkor-memory trust=\"untrusted\">\nNo relevant memories found.\n</gralkor-memory>\n"));
/// assert!(!is_memory_block("<gralkor-memory>x</gralkor-memory> and a question"));
/// assert!(!is_memory_block("<gralkor-memoryx>x</gralkor-memory>"));
/// ```
pub fn is_memory_block(text: &str) -> bool {
    MemoryFilter::new().is_block(text)
}

/// What a capture leaves out (see the [module](self) documentation): the recall
/// block always, and the further blocks given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFilter {
    blocks: Vec<(String, String)>,
}

impl Default for MemoryFilter {
    fn default() -> Self {
        MemoryFilter::new()
    }
}

impl MemoryFilter {
    /// Drops the `<gralkor-memory …>…</gralkor-memory>` block and `memory_search`
    /// results.
    pub fn new() -> MemoryFilter {
        MemoryFilter {
            blocks: vec![(MEMORY_BLOCK_OPEN.into(), MEMORY_BLOCK_CLOSE.into())],
        }
    }

    /// Also drops blocks from `open` to `close` (for example an auto-recall block
    /// `<relevant-memories>` … `</relevant-memories>`). An opening marker ending in
    /// `>` matches exactly; one without (`<my-block`) also matches a tag with
    /// attributes. Blank markers are ignored.
    ///
    /// ```
    /// use gralkor::agent::transcript::MemoryFilter;
    ///
    /// let f = MemoryFilter::new().block("<relevant-memories>", "</relevant-memories>");
    /// assert_eq!(f.strip("<relevant-memories>- tea</relevant-memories>\nHi"), "Hi");
    /// ```
    pub fn block(mut self, open: impl Into<String>, close: impl Into<String>) -> MemoryFilter {
        let (open, close) = (open.into(), close.into());
        if !open.trim().is_empty() && !close.trim().is_empty() {
            self.blocks.push((open, close));
        }
        self
    }

    /// Where the next opening marker of any block is, at or after `from`: its start
    /// and the closing marker to look for.
    fn next_open<'a>(&'a self, text: &str, from: usize) -> Option<(usize, usize, &'a str)> {
        let mut best: Option<(usize, usize, &str)> = None;
        for (open, close) in &self.blocks {
            let mut at = from;
            while let Some(i) = text[at..].find(open.as_str()) {
                let start = at + i;
                let end = start + open.len();
                let tag_ok = open.ends_with('>')
                    || text[end..]
                        .chars()
                        .next()
                        .is_none_or(|c| c == '>' || c.is_whitespace());
                if tag_ok {
                    if best.is_none_or(|(b, _, _)| start < b) {
                        best = Some((start, end, close.as_str()));
                    }
                    break;
                }
                at = end;
            }
        }
        best
    }

    /// `text` without any memory block (trimmed when something was dropped).
    pub fn strip(&self, text: &str) -> String {
        let mut out = String::new();
        let mut at = 0;
        let mut dropped = false;
        while let Some((start, end, close)) = self.next_open(text, at) {
            dropped = true;
            out.push_str(&text[at..start]);
            match text[end..].find(close) {
                Some(i) => at = end + i + close.len(),
                None => {
                    at = text.len();
                    break;
                }
            }
        }
        out.push_str(&text[at..]);
        if dropped { out.trim().to_string() } else { out }
    }

    /// Whether `text` is nothing but memory blocks.
    pub fn is_block(&self, text: &str) -> bool {
        let trimmed = text.trim();
        self.next_open(trimmed, 0).is_some_and(|(s, _, _)| s == 0)
            && self.strip(trimmed).is_empty()
            && self
                .blocks
                .iter()
                .any(|(_, c)| trimmed.ends_with(c.as_str()))
    }

    /// The turn with injected memory blocks and `memory_search` results dropped.
    pub fn scrub(&self, turn: &Turn) -> Turn {
        Turn::new(turn.messages().iter().map(|m| match m.role {
            Role::User | Role::Assistant => Message::new(m.role, self.strip(&m.content)),
            Role::Behaviour => {
                let search = format!("tool {MEMORY_SEARCH_TOOL}");
                if m.content == search || m.content.starts_with(&format!("{search} ")) {
                    Message::behaviour(search)
                } else {
                    Message::behaviour(self.strip(&m.content))
                }
            }
        }))
    }
}

/// Checks a name the transcript needs: non-blank.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::invalid(
            field,
            "must be a non-blank name (there is no generic fallback: it would merge every \
             speaker into one node of the graph)",
        ));
    }
    Ok(())
}

/// Renders turns as the transcript episode (see the [module](self) documentation).
///
/// ```
/// use gralkor::agent::transcript::format_transcript;
/// use gralkor::agent::turn::Turn;
///
/// let turns = [
///     Turn::completed("I moved to Lisbon.", ["thought: note it"], "Welcome to Lisbon!"),
///     Turn::default(),
///     Turn::failed("and the weather?", Vec::<String>::new(), "timeout"),
/// ];
/// assert_eq!(
///     format_transcript(&turns, "Susu", "Ada")?,
///     "Ada: I moved to Lisbon.\nSusu: Welcome to Lisbon!\nAda: and the weather?"
/// );
/// let err = format_transcript(&turns, "Susu", " ").unwrap_err();
/// assert!(err.to_string().contains("`human_name`"));
/// # Ok::<(), gralkor::Error>(())
/// ```
pub fn format_transcript(turns: &[Turn], agent_name: &str, human_name: &str) -> Result<String> {
    check_name("agent_name", agent_name)?;
    check_name("human_name", human_name)?;
    let rendered: Vec<String> = turns
        .iter()
        .map(|t| {
            t.messages()
                .iter()
                .filter_map(|m| match m.role {
                    Role::User => Some(format!("{human_name}: {}", m.content)),
                    Role::Assistant => Some(format!("{agent_name}: {}", m.content)),
                    Role::Behaviour => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|t| !t.is_empty())
        .collect();
    Ok(rendered.join("\n"))
}
