//! Content and its one rule: what an episode holds ([`SourceKind`]), the limits of
//! what is stored, and [`check_content`], checked the same way by the engine and by
//! the memory API before anything is stored.

use crate::{Error, Result};

/// Largest episode content accepted, in bytes (1 MiB).
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

/// Largest source description accepted, in bytes.
pub const MAX_SOURCE_DESCRIPTION_BYTES: usize = 4096;

/// What kind of text an episode holds. Serialised as its stored name (`message`,
/// `text`, `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A conversation turn, `speaker: text`.
    Message,
    /// Free text.
    Text,
    /// A JSON document.
    Json,
}

impl SourceKind {
    /// The name stored in the graph: `message`, `text` or `json`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Message => "message",
            SourceKind::Text => "text",
            SourceKind::Json => "json",
        }
    }

    /// The kind named `s` (as stored by [`SourceKind::as_str`]).
    pub fn parse(s: &str) -> Option<SourceKind> {
        match s {
            "message" => Some(SourceKind::Message),
            "text" => Some(SourceKind::Text),
            "json" => Some(SourceKind::Json),
            _ => None,
        }
    }
}

/// Checks an episode's content as stored (`field` names it in the error): no NUL
/// characters; at most `MAX_CONTENT_BYTES` bytes; message and text content not
/// blank; JSON content a non-empty object or array (`{}` and `[]` hold nothing to
/// remember, so they are refused).
///
/// ```
/// use gralkor::storage::{SourceKind, check_content};
///
/// assert!(check_content("content", SourceKind::Text, "Ada moved to Lisbon.").is_ok());
/// assert!(check_content("content", SourceKind::Message, "  ").is_err());
/// assert!(check_content("content", SourceKind::Json, r#"{"a": 1}"#).is_ok());
/// let err = check_content("content", SourceKind::Json, "{}").unwrap_err();
/// assert!(err.to_string().contains("`content` must not be an empty JSON object"));
/// ```
pub fn check_content(field: &str, source: SourceKind, content: &str) -> Result<()> {
    if content.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::invalid(
            field,
            format!("must be at most {MAX_CONTENT_BYTES} bytes as stored"),
        ));
    }
    match source {
        SourceKind::Message | SourceKind::Text if content.trim().is_empty() => {
            Err(Error::invalid(field, "must not be blank"))
        }
        SourceKind::Message | SourceKind::Text => Ok(()),
        SourceKind::Json => match serde_json::from_str::<serde_json::Value>(content) {
            Ok(serde_json::Value::Object(m)) if m.is_empty() => {
                Err(Error::invalid(field, "must not be an empty JSON object"))
            }
            Ok(serde_json::Value::Array(a)) if a.is_empty() => {
                Err(Error::invalid(field, "must not be an empty JSON array"))
            }
            Ok(serde_json::Value::Object(_) | serde_json::Value::Array(_)) => Ok(()),
            _ => Err(Error::invalid(
                field,
                "must be a JSON object or array for a json episode",
            )),
        },
    }
}

/// An episode's immutable fields, as the one replay rule compares them (the engine's
/// stored episodes and the twin's alike).
pub struct EpisodeFields<'a> {
    pub content: &'a str,
    pub source: SourceKind,
    pub description: &'a str,
    /// `None` when the request gave no reference time: a replay without one does not
    /// compare it.
    pub valid_at: Option<super::Timestamp>,
}

impl EpisodeFields<'_> {
    /// The replay rule: the first immutable field in which `asked` differs from these
    /// (stored) fields, as the request names it; `None` for a true replay.
    pub fn first_difference(&self, asked: &EpisodeFields<'_>) -> Option<&'static str> {
        if self.content != asked.content {
            Some("content")
        } else if self.source != asked.source {
            Some("source")
        } else if self.description != asked.description {
            Some("source_description")
        } else if asked.valid_at.is_some() && self.valid_at != asked.valid_at {
            Some("reference_time")
        } else {
            None
        }
    }
}
