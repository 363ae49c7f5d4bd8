//! Destinations: named graphs that writers save to and searches read.
//!
//! A [`Destination`] is only a name, and it names exactly one *logical graph*:
//!
//! * [`GLOBAL`] (`global`, packaged) — one graph shared by every operator; its logical
//!   id is exactly `global`.
//! * [`PERSONAL`] (`personal`, packaged) — private to one operator; its logical id is
//!   `personal/<operator id>`, with the operator id used byte for byte.
//! * any application name, e.g. `product-knowledge` — one graph shared by every
//!   operator whose logical id is exactly that name. There is no address or scope
//!   syntax: `global/x` is just another name, not a part of `global`.
//!
//! Names beginning `personal/` or `operator/` are reserved (they are, or were, private
//! logical ids) and cannot be registered. The `operator` Destination of earlier
//! versions is **retired**: naming it is an error with migration guidance, and it never
//! falls through to shared-name resolution.
//!
//! A logical id reaches FalkorDB through
//! `physical_graph_name` (`g_` + lowercase hex
//! of its bytes), computed once, when the Destination makes the [`GraphId`].
//!
//! Destinations own no ontology and no ingestion: writers (Lenses, Reflection outputs)
//! do. Several writers may save to one Destination.
//!
//! **Session groups** (`session-<session id>`, [`Destination::session_group`]): one
//! Destination per conversation, as OpenClaw's session groups. They are never
//! registered (a configuration naming one is refused) and never searched by a
//! selector-free search; a request names one explicitly. With an authorizer the
//! first subject to write to a session group becomes its member, and it stays
//! exclusive to its members: everyone else needs an explicit membership
//! (`gralkor add-member`).
//!
//! ```
//! use gralkor::destination::Destination;
//! use gralkor::storage::OperatorId;
//!
//! let op = OperatorId::new("dashboard:42")?;
//! let personal = Destination::personal();
//! assert_eq!(personal.graph_id(&op)?.as_str(), "personal/dashboard:42");
//! assert_eq!(Destination::global().graph_id(&op)?.as_str(), "global");
//!
//! let app = Destination::new("global/x")?; // just a literal name
//! let graph = app.graph_id(&op)?;
//! assert_eq!(graph.as_str(), "global/x");
//! assert_eq!(graph.physical(), "g_676c6f62616c2f78");
//!
//! let err = Destination::new("operator").unwrap_err();
//! assert!(err.to_string().contains("retired"));
//! assert!(Destination::new("personal/alice").is_err());
//! # Ok::<(), gralkor::Error>(())
//! ```

use std::fmt;

mod default_group;
pub use default_group::DefaultGroup;

use crate::storage::GraphId;
use crate::{Error, Result};

/// The packaged shared Destination.
pub const GLOBAL: &str = "global";
/// The packaged per-operator Destination.
pub const PERSONAL: &str = "personal";
/// How every session group's name begins (`session-<session id>`).
pub(crate) const SESSION_GROUP_PREFIX: &str = "session-";
/// The retired per-operator Destination of earlier versions.
pub(crate) const RETIRED_OPERATOR: &str = "operator";
// Name prefixes no application Destination may use (and no operator id may begin
// with), the name rules shared by every name, and the operator id: they live with the
// storage seam, below the Destinations that use them (and are public there, once).
use crate::storage::{OperatorId, RESERVED_PREFIXES, check_name_text};

/// What to tell someone who still names the retired `operator` Destination.
pub(crate) const OPERATOR_MIGRATION: &str = "is retired: use the `personal` Destination (logical graph \
     `personal/<operator id>`) and the `personal-chat` Lens; graphs stored under \
     `operator/<operator id>` are not read and need the explicit graph migration";

/// One named graph. Construct with [`Destination::global`], [`Destination::personal`]
/// or [`Destination::new`] (application names, validated).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Destination {
    name: String,
}

impl Destination {
    /// The packaged shared `global` Destination.
    pub fn global() -> Destination {
        Destination {
            name: GLOBAL.to_string(),
        }
    }

    /// The packaged per-operator `personal` Destination.
    pub fn personal() -> Destination {
        Destination {
            name: PERSONAL.to_string(),
        }
    }

    /// An application Destination. The name must be non-blank, must not begin or end
    /// with whitespace, must not begin with a reserved prefix (`RESERVED_PREFIXES`) and
    /// must not be the retired `operator`. `global` and `personal` give the packaged
    /// Destinations.
    pub fn new(name: impl Into<String>) -> Result<Destination> {
        let name = name.into();
        check_name("destination", &name)?;
        Ok(Destination { name })
    }

    /// The session group of the harness's session `session_id` (non-blank, no NUL):
    /// the Destination `session-<session id>`, one shared graph of that name.
    ///
    /// ```
    /// use gralkor::destination::Destination;
    ///
    /// let group = Destination::session_group("thread-7")?;
    /// assert_eq!(group.name(), "session-thread-7");
    /// assert!(group.is_session_group());
    /// assert!(Destination::session_group(" ").is_err());
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn session_group(session_id: &str) -> Result<Destination> {
        crate::storage::check_session_id("session_id", session_id)?;
        let name = format!("{SESSION_GROUP_PREFIX}{session_id}");
        check_name("session_id", &name)?;
        Ok(Destination { name })
    }

    /// The session group a Destination name denotes (`session-<id>` with a
    /// non-blank id), or `None` for any other name.
    pub(crate) fn session_group_named(field: &str, name: &str) -> Option<Result<Destination>> {
        let id = name.strip_prefix(SESSION_GROUP_PREFIX)?;
        Some(
            crate::storage::check_session_id(field, id)
                .and_then(|()| check_name(field, name))
                .map(|()| Destination {
                    name: name.to_string(),
                }),
        )
    }

    /// Whether this is a session group (`session-<id>`).
    pub fn is_session_group(&self) -> bool {
        self.name.starts_with(SESSION_GROUP_PREFIX)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is the per-operator `personal` Destination.
    pub fn is_personal(&self) -> bool {
        self.name == PERSONAL
    }

    /// Whether this is one of the packaged Destinations (`global`, `personal`).
    pub fn is_packaged(&self) -> bool {
        self.name == PERSONAL || self.name == GLOBAL
    }

    /// The graph of this Destination for `operator`: logical id
    /// `personal/<operator id>` for `personal`, the name itself otherwise, with its
    /// physical name computed once.
    pub fn graph_id(&self, operator: &OperatorId) -> Result<GraphId> {
        if self.is_personal() {
            GraphId::new(format!("{PERSONAL}/{operator}"))
        } else {
            GraphId::new(self.name.clone())
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Checks a Destination name as given anywhere (registration, selection): non-blank,
/// no NUL, at most [`MAX_NAME_BYTES`](crate::storage::MAX_NAME_BYTES) bytes, no surrounding whitespace, not a reserved
/// prefix, not the retired `operator`. `field` names the setting or argument in the
/// error.
pub(crate) fn check_name(field: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    check_name_text(field, name)?;
    if name.trim() != name {
        return Err(Error::invalid(
            field,
            format!("must not begin or end with whitespace (got `{name}`)"),
        ));
    }
    if name == RETIRED_OPERATOR {
        return Err(Error::invalid(
            field,
            format!("`{RETIRED_OPERATOR}` {OPERATOR_MIGRATION}"),
        ));
    }
    if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(**p)) {
        return Err(Error::invalid(
            field,
            format!(
                "`{name}` begins with the reserved prefix `{prefix}` (private logical graph ids and gralkor's own graphs)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str) -> OperatorId {
        OperatorId::new(id).unwrap()
    }

    fn logical(d: &Destination, operator: &str) -> String {
        d.graph_id(&op(operator)).unwrap().as_str().to_string()
    }

    fn physical(d: &Destination, operator: &str) -> String {
        d.graph_id(&op(operator)).unwrap().physical().to_string()
    }

    #[test]
    fn personal_keeps_the_operator_id_byte_for_byte() {
        let p = Destination::personal();
        assert_eq!(logical(&p, "Dash:ABC/é"), "personal/Dash:ABC/é");
        assert_eq!(logical(&p, "a"), "personal/a");
        assert_ne!(logical(&p, "a"), logical(&p, "b"));
    }

    #[test]
    fn shared_destinations_are_the_same_graph_for_every_operator() {
        let g = Destination::global();
        assert_eq!(logical(&g, "a"), logical(&g, "b"));
        let app = Destination::new("product-knowledge").unwrap();
        assert_eq!(logical(&app, "a"), "product-knowledge");
        assert_eq!(logical(&app, "b"), "product-knowledge");
    }

    #[test]
    fn application_names_are_literal() {
        let d = Destination::new("global/x").unwrap();
        assert_eq!(logical(&d, "op"), "global/x");
        assert!(!d.is_packaged());
        assert_ne!(physical(&d, "op"), physical(&Destination::global(), "op"));
    }

    #[test]
    fn physical_names_encode_the_logical_id_once() {
        let p = Destination::personal();
        assert_eq!(
            physical(&p, "a"),
            format!("g_{}", hex::encode("personal/a"))
        );
        // a-b and a_b stay distinct.
        let a = physical(&Destination::new("a-b").unwrap(), "o");
        let b = physical(&Destination::new("a_b").unwrap(), "o");
        assert_ne!(a, b);
    }

    #[test]
    fn reserved_prefixes_blank_and_retired_names_are_rejected() {
        for bad in [
            "personal/x",
            "operator/x",
            "gralkor/capture-buffer",
            "",
            "  ",
            " pad",
            "pad ",
        ] {
            let err = Destination::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidInput { .. }), "{bad:?}: {err}");
        }
        let err = Destination::new("operator").unwrap_err().to_string();
        assert!(err.contains("retired"), "{err}");
        assert!(err.contains("personal"), "{err}");
        assert!(err.contains("personal-chat"), "{err}");
        let err = Destination::new("personal/x").unwrap_err().to_string();
        assert!(err.contains("reserved prefix `personal/`"), "{err}");
    }

    #[test]
    fn operator_ids_are_validated() {
        for bad in ["", " ", "personal/bob", "operator/bob", "gralkor/x", "a\0b"] {
            let err = OperatorId::new(bad).unwrap_err().to_string();
            assert!(err.contains("`operator_id`"), "{bad:?}: {err}");
        }
        assert!(OperatorId::new("o".repeat(crate::storage::MAX_NAME_BYTES + 1)).is_err());
        assert!(OperatorId::new("o".repeat(crate::storage::MAX_NAME_BYTES)).is_ok());
    }
}
