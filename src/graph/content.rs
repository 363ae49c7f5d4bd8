//! The one content rule: what an episode's content must be, checked the same way by
//! the engine ([`AddEpisode::validate`](super::AddEpisode::validate)) and by the memory
//! API before anything is stored.

use super::ingest::MAX_CONTENT_BYTES;
use super::model::SourceKind;
use crate::{Error, Result};

/// Checks an episode's content as stored (`field` names it in the error): no NUL
/// characters; at most [`MAX_CONTENT_BYTES`] bytes; message and text content not
/// blank; JSON content a non-empty object or array (`{}` and `[]` hold nothing to
/// remember, so they are refused).
///
/// ```
/// use gralkor::graph::{SourceKind, check_content};
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
