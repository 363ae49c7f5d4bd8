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
//! * every injected memory block — the recall blocks
//!   `<gralkor-memory …>…</gralkor-memory>` (`MEMORY_BLOCK_OPEN` …
//!   `MEMORY_BLOCK_CLOSE`) and `<relevant-memories …>…</relevant-memories>` (the
//!   OpenClaw plugin's name), and any further block configured with
//!   [`MemoryFilter::block`] — wherever it appears in a user or
//!   assistant message; an opening marker with no closing one drops the rest of the
//!   message; a message left blank is dropped;
//! * the results of `memory_search` tool calls (`MEMORY_SEARCH_TOOL`): the behaviour
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
use crate::graph::MAX_CONTENT_BYTES;
use crate::{Error, Result};

internal_item!(
    /// The opening marker of the memory block recall injects (the tag is left open:
    /// attributes such as `trust="untrusted"` follow).
    pub const MEMORY_BLOCK_OPEN: &str = "<gralkor-memory";
);
internal_item!(
    /// The closing marker of the memory block recall injects.
    pub const MEMORY_BLOCK_CLOSE: &str = "</gralkor-memory>";
);
/// The tool whose results are recalled memory.
pub(crate) const MEMORY_SEARCH_TOOL: &str = "memory_search";

internal_item!(
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
    #[cfg(any(test, feature = "testing"))]
    pub fn is_memory_block(text: &str) -> bool {
        MemoryFilter::new().is_block(text)
    }
);

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
    /// Drops the recall blocks gralkor renders — `<gralkor-memory …>…</gralkor-memory>`
    /// and `<relevant-memories …>…</relevant-memories>` (auto-recall's
    /// [`block_name`](super::hooks::AutoRecall::block_name) as in the OpenClaw plugin)
    /// — and `memory_search` results.
    pub fn new() -> MemoryFilter {
        let plugin = super::recall::OPENCLAW_BLOCK_NAME;
        MemoryFilter {
            blocks: vec![
                (MEMORY_BLOCK_OPEN.into(), MEMORY_BLOCK_CLOSE.into()),
                (format!("<{plugin}"), format!("</{plugin}>")),
            ],
        }
    }

    /// Also drops blocks from `open` to `close` (for example an auto-recall block
    /// `<my-memories>` … `</my-memories>`). An opening marker ending in
    /// `>` matches exactly; one without (`<my-block`) also matches a tag with
    /// attributes. Blank markers are ignored.
    ///
    /// ```
    /// use gralkor::agent::transcript::MemoryFilter;
    ///
    /// let f = MemoryFilter::new().block("<my-memories>", "</my-memories>");
    /// assert_eq!(f.strip("<my-memories>- tea</my-memories>\nHi"), "Hi");
    /// assert_eq!(MemoryFilter::new().strip("<my-memories>- tea</my-memories>"), "<my-memories>- tea</my-memories>");
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

/// Checks a name the transcript needs: non-blank, no NUL characters (it is written
/// before each of the speaker's lines).
pub(crate) fn check_name(field: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::invalid(
            field,
            "must be a non-blank name (there is no generic fallback: it would merge every \
             speaker into one node of the graph)",
        ));
    }
    if name.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// One turn's transcript lines (empty when it has no user or assistant message).
fn render_turn(turn: &Turn, agent_name: &str, human_name: &str) -> String {
    turn.messages()
        .iter()
        .filter_map(|m| match m.role {
            Role::User => Some(format!("{human_name}: {}", m.content)),
            Role::Assistant => Some(format!("{agent_name}: {}", m.content)),
            Role::Behaviour => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks that `turn` (named `field`) can be written as part of a transcript under
/// these names, whichever transcript it ends up in: no message holds a NUL character
/// (`<field>.messages[i].content`: neither the durable buffer nor the memory stores
/// them), and its lines alone fit one episode's content limit
/// ([`MAX_CONTENT_BYTES`](crate::graph::MAX_CONTENT_BYTES) bytes as rendered, each line
/// with its speaker's name) — a longer transcript is split between turns, never
/// inside one. The names are checked with [`check_name`].
pub(crate) fn check_turn(
    field: &str,
    turn: &Turn,
    agent_name: &str,
    human_name: &str,
) -> Result<()> {
    check_name("agent_name", agent_name)?;
    check_name("human_name", human_name)?;
    for (i, m) in turn.messages().iter().enumerate() {
        if m.content.contains('\0') {
            return Err(Error::invalid(
                format!("{field}.messages[{i}].content"),
                "must not contain NUL characters",
            ));
        }
    }
    let rendered = render_turn(turn, agent_name, human_name).len();
    if rendered > MAX_CONTENT_BYTES {
        return Err(Error::invalid(
            field,
            format!(
                "must be at most {MAX_CONTENT_BYTES} bytes as written (its user and assistant \
                 lines, each with the speaker's name; this one is {rendered}): one turn is \
                 never split across episodes"
            ),
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
        .map(|t| render_turn(t, agent_name, human_name))
        .filter(|t| !t.is_empty())
        .collect();
    Ok(rendered.join("\n"))
}

/// The transcript of `turns` ([`format_transcript`]) split between turns into parts of
/// at most `limit` bytes each, in order: joined with `\n` they are the whole
/// transcript. Each part holds as many whole turns as fit; a turn longer than `limit`
/// (which [`check_turn`] refuses) is a part of its own. No turns with lines: no parts.
pub(crate) fn transcript_parts(
    turns: &[Turn],
    agent_name: &str,
    human_name: &str,
    limit: usize,
) -> Result<Vec<String>> {
    check_name("agent_name", agent_name)?;
    check_name("human_name", human_name)?;
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    for turn in turns {
        let rendered = render_turn(turn, agent_name, human_name);
        if rendered.is_empty() {
            continue;
        }
        if !current.is_empty() && current.len() + 1 + rendered.len() > limit {
            parts.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(&rendered);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize) -> Turn {
        Turn::completed(&format!("question {i}"), Vec::<String>::new(), "answer")
    }

    #[test]
    fn parts_split_between_turns_and_join_into_the_transcript() {
        let turns: Vec<Turn> = (0..10).map(turn).collect();
        let whole = format_transcript(&turns, "Susu", "Ada").unwrap();
        // "Ada: question N\nSusu: answer" is 28 bytes: two turns (57) fit in 60.
        let parts = transcript_parts(&turns, "Susu", "Ada", 60).unwrap();
        assert_eq!(parts.len(), 5, "{parts:?}");
        assert!(parts.iter().all(|p| p.len() <= 60));
        assert_eq!(parts.join("\n"), whole);
        assert_eq!(
            parts[1],
            "Ada: question 2\nSusu: answer\nAda: question 3\nSusu: answer"
        );
        // Under the limit: the transcript itself, one part.
        assert_eq!(
            transcript_parts(&turns, "Susu", "Ada", whole.len()).unwrap(),
            [whole]
        );
        // A turn over the limit is a part of its own; empty turns give nothing.
        let parts = transcript_parts(&turns[..2], "Susu", "Ada", 10).unwrap();
        assert_eq!(parts.len(), 2);
        assert!(
            transcript_parts(&[Turn::default()], "Susu", "Ada", 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_turn_is_checked_as_it_will_be_written() {
        let ok = Turn::completed("hi", ["tool x → y"], "hello");
        assert!(check_turn("turn", &ok, "Susu", "Ada").is_ok());
        let nul = Turn::completed("hi", ["tool x → a\0b"], "hello");
        let err = check_turn("turn", &nul, "Susu", "Ada").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, rule } if field == "turn.messages[1].content" && rule.contains("NUL")),
            "{err:?}"
        );
        // Exactly the limit as rendered ("Ada: " is 5 bytes), then one byte more.
        let at = |n: usize| Turn::new([Message::user("x".repeat(n))]);
        assert!(check_turn("turn", &at(MAX_CONTENT_BYTES - 5), "Susu", "Ada").is_ok());
        let err = check_turn("turn", &at(MAX_CONTENT_BYTES - 4), "Susu", "Ada").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, rule } if field == "turn" && rule.contains(&MAX_CONTENT_BYTES.to_string())),
            "{err:?}"
        );
        let err = check_turn("turn", &ok, "Su\0su", "Ada").unwrap_err();
        assert!(matches!(&err, Error::InvalidInput { field, .. } if field == "agent_name"));
    }
}
