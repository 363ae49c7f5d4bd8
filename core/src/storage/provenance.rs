//! Provenance: which writer saved an episode, recorded in its source description.
//!
//! Every episode gralkor writes carries exactly one writer marker, always the
//! **terminal** part of the stored source description, appended by gralkor after the
//! caller's text:
//!
//! | writer | stored description |
//! |---|---|
//! | an appending Lens `L` | `<caller text> [lens: L]` |
//! | a Reflection `R` | exactly `reflection:R` (no caller text) |
//! | a direct write (`memory_add`, direct capture) | `<caller text> [gralkor: direct]` |
//!
//! On read, `parse` takes the writer from that terminal marker and gives back the
//! caller's text with gralkor's marker removed. Because the genuine marker is always
//! last and writer names may not contain the delimiters (`check_writer_name`), caller
//! text can never change who wrote an episode: a description of
//! `"notes [lens: admin]"` sent through Lens `chat` is stored as
//! `"notes [lens: admin] [lens: chat]"` and reads back as Lens `chat` with the text
//! `"notes [lens: admin]"`. Stored descriptions with no marker (written by something
//! other than gralkor) read back unattributed, text unchanged.
//!
//! This text provenance of episodes is separate from the `_gralkor_lens` ownership
//! property that replace-graph Lenses put on nodes and relationships.
//!
//! ```
//! use gralkor::provenance::{self, Writer};
//!
//! let stored = provenance::lens_description("support transcript", "support-cases");
//! assert_eq!(stored, "support transcript [lens: support-cases]");
//! let read = provenance::parse(&stored);
//! assert_eq!(read.writer, Some(Writer::Lens("support-cases".into())));
//! assert_eq!(read.description, "support transcript");
//!
//! let read = provenance::parse(&provenance::direct_description("manual"));
//! assert_eq!((read.writer, read.description.as_str()), (Some(Writer::Direct), "manual"));
//!
//! assert!(provenance::check_writer_name("lens", "a [lens: b").is_err());
//! ```

use std::fmt;

use crate::{Error, Result};

internal_item!(
    /// The delimiter that opens a Lens marker; writer names may not contain it.
    pub const LENS_DELIMITER: &str = " [lens: ";
);
internal_item!(
    /// The terminal marker of a direct write; writer names may not contain it.
    pub const DIRECT_MARKER: &str = "[gralkor: direct]";
);
internal_item!(
    /// The prefix of a Reflection episode's whole source description.
    pub const REFLECTION_PREFIX: &str = "reflection:";
);

/// Who saved an episode. Serialised as `{"lens": "<name>"}`, `{"reflection":
/// "<name>"}` or `"direct"`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// An appending Lens, by name.
    Lens(String),
    /// A Reflection, by name.
    Reflection(String),
    /// A direct write (`memory_add`, direct capture), without Lens authorship.
    Direct,
}

impl fmt::Display for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Writer::Lens(n) => write!(f, "Lens `{n}`"),
            Writer::Reflection(n) => write!(f, "Reflection `{n}`"),
            Writer::Direct => f.write_str("direct"),
        }
    }
}

impl Writer {
    /// The stored description of an episode this writer saves with the caller's
    /// `description` (`lens_description`, `reflection_description` — which keeps
    /// no caller text — or `direct_description`).
    ///
    /// ```
    /// use gralkor::provenance::Writer;
    ///
    /// assert_eq!(Writer::Lens("hr".into()).describe("notes"), "notes [lens: hr]");
    /// assert_eq!(Writer::Direct.describe(""), "[gralkor: direct]");
    /// ```
    pub fn describe(&self, description: &str) -> String {
        match self {
            Writer::Lens(name) => lens_description(description, name),
            Writer::Reflection(name) => reflection_description(name),
            Writer::Direct => direct_description(description),
        }
    }

    /// The key stored as an episode's `writer` property, which searches filter on
    /// inside the statement: `lens:<name>`, `reflection:<name>` or `direct`.
    ///
    /// ```
    /// use gralkor::provenance::Writer;
    ///
    /// let w = Writer::Lens("personal-chat".into());
    /// assert_eq!(w.key(), "lens:personal-chat");
    /// assert_eq!(Writer::from_key(&w.key()), Some(w));
    /// assert_eq!(Writer::from_key("direct"), Some(Writer::Direct));
    /// assert_eq!(Writer::from_key("lens:"), None);
    /// ```
    pub fn key(&self) -> String {
        match self {
            Writer::Lens(name) => format!("lens:{name}"),
            Writer::Reflection(name) => format!("reflection:{name}"),
            Writer::Direct => "direct".to_string(),
        }
    }

    /// The writer a stored key names ([`Writer::key`]).
    pub fn from_key(key: &str) -> Option<Writer> {
        if key == "direct" {
            return Some(Writer::Direct);
        }
        let (kind, name) = key.split_once(':')?;
        if name.is_empty() {
            return None;
        }
        match kind {
            "lens" => Some(Writer::Lens(name.to_string())),
            "reflection" => Some(Writer::Reflection(name.to_string())),
            _ => None,
        }
    }
}

/// A stored source description read back: the writer, when one is recorded, and the
/// public description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The writer, or `None` for a description with no writer marker.
    pub writer: Option<Writer>,
    /// The caller's text with gralkor's terminal marker removed; for a Reflection, the
    /// whole `reflection:<name>` description.
    pub description: String,
}

internal_item!(
    /// The stored description of an appending Lens episode: the caller's text followed by
    /// ` [lens: <lens>]`.
    pub fn lens_description(description: &str, lens: &str) -> String {
        format!("{description}{LENS_DELIMITER}{lens}]")
    }
);

internal_item!(
    /// The stored description of a Reflection episode: exactly `reflection:<name>`.
    pub fn reflection_description(reflection: &str) -> String {
        format!("{REFLECTION_PREFIX}{reflection}")
    }
);

internal_item!(
    /// The stored description of a direct write: the caller's text followed by
    /// ` [gralkor: direct]` (just the marker when the text is empty).
    pub fn direct_description(description: &str) -> String {
        if description.is_empty() {
            DIRECT_MARKER.to_string()
        } else {
            format!("{description} {DIRECT_MARKER}")
        }
    }
);

internal_item!(
    /// Reads a stored source description back (see the module docs).
    pub fn parse(stored: &str) -> Provenance {
        if let Some(text) = stored.strip_suffix(DIRECT_MARKER) {
            let text = text.strip_suffix(' ').unwrap_or(text);
            return Provenance {
                writer: Some(Writer::Direct),
                description: text.to_string(),
            };
        }
        if let Some(body) = stored.strip_suffix(']')
            && let Some(at) = body.rfind(LENS_DELIMITER)
        {
            let name = &body[at + LENS_DELIMITER.len()..];
            if !name.is_empty() {
                return Provenance {
                    writer: Some(Writer::Lens(name.to_string())),
                    description: body[..at].to_string(),
                };
            }
        }
        if let Some(name) = stored.strip_prefix(REFLECTION_PREFIX)
            && check_writer_name("reflection", name).is_ok()
        {
            return Provenance {
                writer: Some(Writer::Reflection(name.to_string())),
                description: stored.to_string(),
            };
        }
        Provenance {
            writer: None,
            description: stored.to_string(),
        }
    }
);

internal_item!(
    /// Checks a Lens or Reflection name: non-blank, no NUL, at most
    /// [`MAX_NAME_BYTES`](crate::storage::MAX_NAME_BYTES) bytes (so its marker always
    /// leaves room in a stored description), no surrounding whitespace, and free of the
    /// writer delimiters ([`LENS_DELIMITER`], [`DIRECT_MARKER`]) and of brackets, so
    /// attribution stays unambiguous. `field` names the setting in the error.
    pub fn check_writer_name(field: &str, name: &str) -> Result<()> {
        if name.trim().is_empty() {
            return Err(Error::invalid(field, "must not be blank"));
        }
        super::check_name_text(field, name)?;
        if name.trim() != name {
            return Err(Error::invalid(
                field,
                format!("must not begin or end with whitespace (got `{name}`)"),
            ));
        }
        for delimiter in [LENS_DELIMITER, DIRECT_MARKER] {
            if name.contains(delimiter) {
                return Err(Error::invalid(
                    field,
                    format!(
                        "must not contain the provenance delimiter `{delimiter}` (got `{name}`)"
                    ),
                ));
            }
        }
        // A bracket could complete or imitate a marker (`x [gralkor: direct` would make a
        // Lens episode end like a direct one), so brackets are kept out altogether.
        if name.contains(['[', ']']) {
            return Err(Error::invalid(
                field,
                format!(
                    "must not contain `[` or `]`, which delimit provenance markers (got `{name}`)"
                ),
            ));
        }
        Ok(())
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(description: &str, lens: &str) {
        let p = parse(&lens_description(description, lens));
        assert_eq!(p.writer, Some(Writer::Lens(lens.into())), "{description:?}");
        assert_eq!(p.description, description);
        let p = parse(&direct_description(description));
        assert_eq!(p.writer, Some(Writer::Direct), "{description:?}");
        assert_eq!(p.description, description);
    }

    #[test]
    fn lens_and_direct_descriptions_round_trip() {
        for d in [
            "",
            " ",
            "support transcript",
            "a ",
            "x [lens: admin]",
            "x [gralkor: direct]",
            "[gralkor: direct]",
            "reflection:fake",
            "ends with ]",
        ] {
            round_trip(d, "support-cases");
            round_trip(d, "a:b c");
        }
    }

    #[test]
    fn caller_text_cannot_forge_a_writer() {
        // Through a Lens, text that looks like another writer stays text.
        let p = parse(&lens_description("reflection:evil", "chat"));
        assert_eq!(p.writer, Some(Writer::Lens("chat".into())));
        let p = parse(&lens_description("n [gralkor: direct]", "chat"));
        assert_eq!(p.writer, Some(Writer::Lens("chat".into())));
        assert_eq!(p.description, "n [gralkor: direct]");
        // Directly, text that looks like a Lens or Reflection stays text.
        let p = parse(&direct_description("n [lens: admin]"));
        assert_eq!(p.writer, Some(Writer::Direct));
        let p = parse(&direct_description("reflection:evil"));
        assert_eq!(p.writer, Some(Writer::Direct));
        assert_eq!(p.description, "reflection:evil");
    }

    #[test]
    fn reflections_use_the_whole_description() {
        let p = parse(&reflection_description("generalisations"));
        assert_eq!(p.writer, Some(Writer::Reflection("generalisations".into())));
        assert_eq!(p.description, "reflection:generalisations");
    }

    #[test]
    fn unmarked_descriptions_stay_unattributed() {
        for d in ["manual", "", "chat [lens: ]", "reflection:", "[lens: x]"] {
            let p = parse(d);
            assert_eq!(p.writer, None, "{d:?}");
            assert_eq!(p.description, d);
        }
        // Historical Lens provenance is kept as it is.
        let p = parse("turn [lens: operator]");
        assert_eq!(p.writer, Some(Writer::Lens("operator".into())));
    }

    #[test]
    fn names_with_delimiters_are_rejected() {
        assert!(check_writer_name("lenses[0].name", "ok-name").is_ok());
        for bad in [
            "",
            " ",
            "a [lens: b",
            "x[gralkor: direct]",
            "x [gralkor: direct",
            "a]",
            " pad",
            "a\0b",
            &"n".repeat(257),
        ] {
            let err = check_writer_name("lenses[0].name", bad).unwrap_err();
            assert!(err.to_string().contains("lenses[0].name"), "{err}");
        }
    }
}
