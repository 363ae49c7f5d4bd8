//! What may be stored: [`Content`] and its rule, source descriptions with their writer
//! marker, query texts and result counts. The memory API, the Lens store and the
//! engine check with these same functions.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::provenance::Writer;
pub use crate::vocab::SourceKind;
use crate::vocab::{MAX_SEARCH_LIMIT, MAX_SOURCE_DESCRIPTION_BYTES, check_content};
use crate::{Error, Result};

/// The default number of results per Destination of a search.
pub const DEFAULT_MAX_RESULTS: usize = 20;

/// The most results per Destination a search may ask for (the engine's limit).
pub const MAX_RESULTS_LIMIT: usize = MAX_SEARCH_LIMIT;

/// Content to remember, with its source kind: text for a conversation or a
/// document, a JSON object or array for a structured record. Serialised externally
/// tagged: `{"conversation": "Ada: hi"}`, `{"structured_record": {"k": 1}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Speaker-attributed text (a [`SourceKind::Message`] episode).
    Conversation(String),
    /// Free text (a [`SourceKind::Text`] episode).
    Document(String),
    /// A JSON object or array (a [`SourceKind::Json`] episode).
    StructuredRecord(Value),
}

impl Content {
    /// Conversation text.
    pub fn conversation(text: impl Into<String>) -> Content {
        Content::Conversation(text.into())
    }

    /// Document text.
    pub fn document(text: impl Into<String>) -> Content {
        Content::Document(text.into())
    }

    /// A structured record (must be a non-empty JSON object or array).
    pub fn structured(record: Value) -> Content {
        Content::StructuredRecord(record)
    }

    /// The episode kind it is stored as.
    pub fn kind(&self) -> SourceKind {
        match self {
            Content::Conversation(_) => SourceKind::Message,
            Content::Document(_) => SourceKind::Text,
            Content::StructuredRecord(_) => SourceKind::Json,
        }
    }

    /// The text of a conversation or document.
    pub fn text(&self) -> Option<&str> {
        match self {
            Content::Conversation(t) | Content::Document(t) => Some(t),
            Content::StructuredRecord(_) => None,
        }
    }

    /// The content as stored: the text itself, or the record JSON-encoded canonically
    /// (compact, object keys sorted at every level), so the stored text and every id
    /// derived from it are the same whatever serde_json's map order — a dependency
    /// (rig's, behind the `rig` feature) may turn on its `preserve_order`.
    pub fn encoded(&self) -> String {
        match self {
            Content::Conversation(t) | Content::Document(t) => t.clone(),
            Content::StructuredRecord(v) => canonical_json(v),
        }
    }
}

/// `v` as compact JSON with object keys sorted at every level.
#[doc(hidden)]
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The words of `text` for the storages' word matching: runs of letters and digits,
/// lowercased.
#[doc(hidden)]
pub fn words(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The share of `wanted` found among `text`'s [`words`] (0 when nothing is shared).
#[doc(hidden)]
pub fn overlap(wanted: &std::collections::HashSet<String>, text: &str) -> f64 {
    if wanted.is_empty() {
        return 0.0;
    }
    let found = words(text);
    wanted.iter().filter(|w| found.contains(*w)).count() as f64 / wanted.len() as f64
}

/// Checks content with its one rule, the engine's too ([`check_content`]), on what
/// will be stored: non-blank text, a non-empty JSON object or array, no NUL
/// characters, at most 1 MiB (`MAX_CONTENT_BYTES`) as stored.
///
/// ```
/// use gralkor::storage::{Content, validate_content};
///
/// assert!(validate_content("content", &Content::document("Ada likes tea.")).is_ok());
/// assert!(validate_content("content", &Content::structured(serde_json::json!({}))).is_err());
/// assert!(validate_content("content", &Content::structured(serde_json::json!(7))).is_err());
/// ```
pub fn validate_content(field: &str, content: &Content) -> Result<()> {
    if let Content::StructuredRecord(v) = content
        && !(v.is_object() || v.is_array())
    {
        return Err(Error::invalid(
            field,
            "a structured record must be a JSON object or array",
        ));
    }
    check_content(field, content.kind(), &content.encoded())
}

/// Checks a caller's source description that will be stored with `writer`'s marker:
/// no NUL characters, and at most `MAX_SOURCE_DESCRIPTION_BYTES` bytes with the
/// marker.
pub fn validate_source_description(field: &str, description: &str, writer: &Writer) -> Result<()> {
    if description.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    let stored = writer.describe(description);
    if stored.len() <= MAX_SOURCE_DESCRIPTION_BYTES {
        return Ok(());
    }
    // What gralkor adds (a Reflection's description is its marker alone); no length
    // arithmetic here may wrap, whatever the writer's name.
    let fixed = match writer {
        Writer::Reflection(_) => stored.len(),
        Writer::Lens(_) | Writer::Direct => stored.len().saturating_sub(description.len()),
    };
    let rule = match MAX_SOURCE_DESCRIPTION_BYTES.checked_sub(fixed) {
        Some(room) => format!(
            "must be at most {room} bytes (the stored description, {writer} marker included, \
             is limited to {MAX_SOURCE_DESCRIPTION_BYTES})"
        ),
        None => format!(
            "cannot be stored: the {writer} marker alone is {fixed} bytes, over the \
             {MAX_SOURCE_DESCRIPTION_BYTES}-byte limit of a stored description"
        ),
    };
    Err(Error::invalid(field, rule))
}

/// Checks a query text: non-blank, no NUL characters (the engine's search refuses
/// them).
#[doc(hidden)]
pub fn validate_query(field: &str, query: &str) -> Result<()> {
    if query.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    if query.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// Checks a per-graph result count: 1 to [`MAX_RESULTS_LIMIT`].
#[doc(hidden)]
pub fn validate_max_results(field: &str, n: usize) -> Result<()> {
    if n == 0 || n > MAX_RESULTS_LIMIT {
        return Err(Error::invalid(
            field,
            format!("must be between 1 and {MAX_RESULTS_LIMIT} (got {n})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structured_record_is_encoded_canonically_whatever_the_map_order() {
        use serde_json::json;
        let mut record = serde_json::Map::new();
        record.insert("zeta".into(), json!(1));
        record.insert("alpha".into(), json!({"y": [true, null, "é\"q"], "b": 2.5}));
        let content = Content::structured(Value::Object(record));
        assert_eq!(
            content.encoded(),
            r#"{"alpha":{"b":2.5,"y":[true,null,"é\"q"]},"zeta":1}"#
        );
        // The default map's own encoding is the same text.
        let parsed: Value = serde_json::from_str(&content.encoded()).unwrap();
        assert_eq!(canonical_json(&parsed), content.encoded());
    }

    #[test]
    fn a_marker_longer_than_the_description_limit_is_an_error_not_an_overflow() {
        // Writers built outside a runtime configuration can carry any name: the limit
        // arithmetic must not wrap (a debug build used to panic here).
        for writer in [
            Writer::Lens("l".repeat(5000)),
            Writer::Reflection("r".repeat(5000)),
        ] {
            let err = validate_source_description("source_description", "notes", &writer)
                .unwrap_err()
                .to_string();
            assert!(err.contains("`source_description`"), "{err}");
            assert!(!err.contains("18446744073709"), "{err}");
        }
        // At the edge: exactly the room left beside the marker fits, one byte more not.
        let writer = Writer::Lens("notes".into());
        let room = MAX_SOURCE_DESCRIPTION_BYTES - " [lens: notes]".len();
        validate_source_description("d", &"x".repeat(room), &writer).unwrap();
        let err = validate_source_description("d", &"x".repeat(room + 1), &writer)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("must be at most {room} bytes")),
            "{err}"
        );
    }
}
