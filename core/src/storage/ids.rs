//! Validated identifiers: [`OperatorId`] and [`GraphId`], each checked once when it is
//! made, and the name rules every name shares.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::vocab::physical_graph_name;
use crate::{Error, Result};

/// The most UTF-8 bytes any name may have: a Destination, Lens or Reflection name, or
/// an operator id. Writer names end up in every stored source description (whose limit
/// is 4,096 bytes with the marker), so a name must leave room for the caller's text.
pub const MAX_NAME_BYTES: usize = 256;

/// Name prefixes that belong to resolved private logical graph ids and to gralkor's
/// own graphs (`gralkor/capture-buffer`, the capture buffer's; `gralkor/access`, the
/// embedded authorizer's): no application
/// Destination may use them, and no operator id may begin with one.
#[doc(hidden)]
pub const RESERVED_PREFIXES: [&str; 3] = ["personal/", "operator/", "gralkor/"];

/// What every name must satisfy, wherever it is given (configuration, request,
/// operator id): no NUL characters and at most [`MAX_NAME_BYTES`] bytes. `field` names
/// the setting or argument in the error.
///
/// ```
/// use gralkor::storage::{check_name_text, MAX_NAME_BYTES};
///
/// assert!(check_name_text("lenses[0].name", &"n".repeat(MAX_NAME_BYTES)).is_ok());
/// let err = check_name_text("lenses[0].name", &"n".repeat(5000)).unwrap_err();
/// assert!(err.to_string().contains("`lenses[0].name` must be at most 256 bytes"));
/// assert!(check_name_text("operator_id", "a\0b").is_err());
/// ```
#[doc(hidden)]
pub fn check_name_text(field: &str, name: &str) -> Result<()> {
    if name.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(
            field,
            format!(
                "must be at most {MAX_NAME_BYTES} bytes (got {})",
                name.len()
            ),
        ));
    }
    Ok(())
}

/// What a session id must satisfy (it comes from the harness; gralkor never mints
/// one): not blank, no NUL characters, at most [`MAX_NAME_BYTES`] bytes. `field` names
/// the argument in the error.
///
/// ```
/// use gralkor::storage::check_session_id;
///
/// assert!(check_session_id("session_id", "3f2c-telegram-42").is_ok());
/// let err = check_session_id("session_id", " ").unwrap_err();
/// assert!(err.to_string().contains("`session_id` must not be blank"), "{err}");
/// ```
#[doc(hidden)]
pub fn check_session_id(field: &str, session: &str) -> Result<()> {
    if session.trim().is_empty() {
        return Err(Error::invalid(
            field,
            "must not be blank (it comes from the harness; gralkor never mints one)",
        ));
    }
    check_name_text(field, session)
}

/// The operator (user, tenant, dashboard session…) a request acts for: non-blank, no
/// NUL, at most [`MAX_NAME_BYTES`] bytes, and not itself a resolved private graph name
/// (`personal/…`, `operator/…`), so a caller cannot reach another operator's graph by
/// passing one. Otherwise it is used byte for byte (case, punctuation and colons kept).
///
/// Checked once, when it is made ([`OperatorId::new`], [`str::parse`], or
/// deserialisation); every request carries one, so no operation checks it again.
///
/// ```
/// use gralkor::storage::OperatorId;
///
/// let op = OperatorId::new("dashboard:0f3a")?;
/// assert_eq!(op.as_str(), "dashboard:0f3a");
/// assert!(OperatorId::new(" ").is_err());
/// let err = OperatorId::new("personal/alice").unwrap_err();
/// assert!(err.to_string().contains("`operator_id`"));
/// let parsed: OperatorId = serde_json::from_str("\"op-7\"").unwrap();
/// assert_eq!(parsed, OperatorId::new("op-7")?);
/// assert!(serde_json::from_str::<OperatorId>("\"\"").is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OperatorId(String);

impl OperatorId {
    /// Checks `id` (the error names the field `operator_id`).
    pub fn new(id: impl Into<String>) -> Result<OperatorId> {
        let id = id.into();
        check_operator_id("operator_id", &id)?;
        Ok(OperatorId(id))
    }

    /// The id as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The operator id rule, with the error naming `field`.
fn check_operator_id(field: &str, operator_id: &str) -> Result<()> {
    if operator_id.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    check_name_text(field, operator_id)?;
    if let Some(prefix) = RESERVED_PREFIXES
        .iter()
        .find(|p| operator_id.starts_with(**p))
    {
        return Err(Error::invalid(
            field,
            format!(
                "must be an operator id, not a resolved private graph name (begins with `{prefix}`)"
            ),
        ));
    }
    Ok(())
}

impl TryFrom<String> for OperatorId {
    type Error = Error;
    fn try_from(id: String) -> Result<OperatorId> {
        OperatorId::new(id)
    }
}

impl TryFrom<&str> for OperatorId {
    type Error = Error;
    fn try_from(id: &str) -> Result<OperatorId> {
        OperatorId::new(id)
    }
}

impl FromStr for OperatorId {
    type Err = Error;
    fn from_str(id: &str) -> Result<OperatorId> {
        OperatorId::new(id)
    }
}

impl From<&OperatorId> for OperatorId {
    fn from(id: &OperatorId) -> OperatorId {
        id.clone()
    }
}

impl From<OperatorId> for String {
    fn from(id: OperatorId) -> String {
        id.0
    }
}

impl AsRef<str> for OperatorId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One logical graph (`global`, `personal/<operator id>`, an application name) with
/// its physical FalkorDB graph name, computed and checked once when it is made.
/// Destinations make them (`Destination::graph_id`);
/// every [`Storage`](super::Storage) call takes one.
///
/// ```
/// use gralkor::storage::GraphId;
///
/// let g = GraphId::new("personal/Ada")?;
/// assert_eq!(g.as_str(), "personal/Ada");
/// assert_ne!(g.physical(), g.as_str()); // encoded: case and `/` are kept apart
/// assert!(GraphId::new("").is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GraphId {
    logical: String,
    physical: String,
}

impl GraphId {
    /// Checks a logical graph id and computes its physical name
    /// (`physical_graph_name`).
    pub fn new(logical: impl Into<String>) -> Result<GraphId> {
        let logical = logical.into();
        let physical = physical_graph_name(&logical)?;
        Ok(GraphId { logical, physical })
    }

    /// The logical id (what the engine and the database handle take).
    pub fn as_str(&self) -> &str {
        &self.logical
    }

    /// The physical FalkorDB graph name.
    pub fn physical(&self) -> &str {
        &self.physical
    }
}

impl TryFrom<String> for GraphId {
    type Error = Error;
    fn try_from(logical: String) -> Result<GraphId> {
        GraphId::new(logical)
    }
}

impl From<GraphId> for String {
    fn from(id: GraphId) -> String {
        id.logical
    }
}

impl AsRef<str> for GraphId {
    fn as_ref(&self) -> &str {
        &self.logical
    }
}

impl fmt::Display for GraphId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.logical)
    }
}
