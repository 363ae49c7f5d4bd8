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
//! A logical id reaches FalkorDB through [`physical_graph_name`] (`g_` + lowercase hex
//! of its bytes), exactly once, at the storage boundary.
//!
//! Destinations own no ontology and no ingestion: writers (Lenses, Reflection outputs)
//! do. Several writers may save to one Destination.
//!
//! ```
//! use gralkor::destination::Destination;
//!
//! let personal = Destination::personal();
//! assert_eq!(personal.graph_id("dashboard:42")?, "personal/dashboard:42");
//! assert_eq!(Destination::global().graph_id("dashboard:42")?, "global");
//!
//! let app = Destination::new("global/x")?; // just a literal name
//! assert_eq!(app.graph_id("anyone")?, "global/x");
//! assert_eq!(app.physical_graph("anyone")?, "g_676c6f62616c2f78");
//!
//! let err = Destination::new("operator").unwrap_err();
//! assert!(err.to_string().contains("retired"));
//! assert!(Destination::new("personal/alice").is_err());
//! # Ok::<(), gralkor::Error>(())
//! ```

use std::fmt;

use crate::falkordb::physical_graph_name;
use crate::{Error, Result};

/// The packaged shared Destination.
pub const GLOBAL: &str = "global";
/// The packaged per-operator Destination.
pub const PERSONAL: &str = "personal";
/// The retired per-operator Destination of earlier versions.
pub const RETIRED_OPERATOR: &str = "operator";
/// Name prefixes no application Destination may use.
pub const RESERVED_PREFIXES: [&str; 2] = ["personal/", "operator/"];

/// The most UTF-8 bytes any name may have: a Destination, Lens or Reflection name, or
/// an operator id. Writer names end up in every stored source description (whose limit
/// is 4,096 bytes with the marker), so a name must leave room for the caller's text.
pub const MAX_NAME_BYTES: usize = 256;

/// What every name must satisfy, wherever it is given (configuration, request,
/// selector): no NUL characters and at most [`MAX_NAME_BYTES`] bytes. `field` names the
/// setting or argument in the error.
///
/// ```
/// use gralkor::destination::{check_name_text, MAX_NAME_BYTES};
///
/// assert!(check_name_text("lenses[0].name", &"n".repeat(MAX_NAME_BYTES)).is_ok());
/// let err = check_name_text("lenses[0].name", &"n".repeat(5000)).unwrap_err();
/// assert!(err.to_string().contains("`lenses[0].name` must be at most 256 bytes (got 5000)"));
/// assert!(check_name_text("operator_id", "a\0b").is_err());
/// ```
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

/// What to tell someone who still names the retired `operator` Destination.
pub const OPERATOR_MIGRATION: &str = "is retired: use the `personal` Destination (logical graph \
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
    /// with whitespace, must not begin with a reserved prefix ([`RESERVED_PREFIXES`]) and
    /// must not be the retired `operator`. `global` and `personal` give the packaged
    /// Destinations.
    pub fn new(name: impl Into<String>) -> Result<Destination> {
        let name = name.into();
        check_name("destination", &name)?;
        Ok(Destination { name })
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

    /// The logical graph id for `operator_id`: `personal/<operator id>` for
    /// `personal`, the name itself otherwise. The operator id is checked with
    /// [`validate_operator_id`] even when the graph does not depend on it.
    pub fn graph_id(&self, operator_id: &str) -> Result<String> {
        validate_operator_id("operator_id", operator_id)?;
        if self.is_personal() {
            Ok(format!("{PERSONAL}/{operator_id}"))
        } else {
            Ok(self.name.clone())
        }
    }

    /// The physical FalkorDB graph name for `operator_id` (see
    /// [`physical_graph_name`]).
    pub fn physical_graph(&self, operator_id: &str) -> Result<String> {
        physical_graph_name(&self.graph_id(operator_id)?)
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Checks a Destination name as given anywhere (registration, selection): non-blank,
/// no NUL, at most [`MAX_NAME_BYTES`] bytes, no surrounding whitespace, not a reserved
/// prefix, not the retired `operator`. `field` names the setting or argument in the
/// error.
pub fn check_name(field: &str, name: &str) -> Result<()> {
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
                "`{name}` begins with the reserved prefix `{prefix}` (private logical graph ids)"
            ),
        ));
    }
    Ok(())
}

/// Checks an operator id: non-blank, no NUL, at most [`MAX_NAME_BYTES`] bytes, and not
/// itself a resolved private graph name (`personal/…`, `operator/…`), so a caller
/// cannot reach another graph by passing one. Otherwise the id is used byte for byte
/// (case, punctuation and colons kept).
///
/// ```
/// use gralkor::destination::validate_operator_id;
///
/// assert!(validate_operator_id("operator_id", "dashboard:0f3a").is_ok());
/// assert!(validate_operator_id("operator_id", " ").is_err());
/// assert!(validate_operator_id("operator_id", "personal/alice").is_err());
/// ```
pub fn validate_operator_id(field: &str, operator_id: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_keeps_the_operator_id_byte_for_byte() {
        let p = Destination::personal();
        assert_eq!(p.graph_id("Dash:ABC/é").unwrap(), "personal/Dash:ABC/é");
        assert_eq!(p.graph_id("a").unwrap(), "personal/a");
        assert_ne!(p.graph_id("a").unwrap(), p.graph_id("b").unwrap());
    }

    #[test]
    fn shared_destinations_are_the_same_graph_for_every_operator() {
        let g = Destination::global();
        assert_eq!(g.graph_id("a").unwrap(), g.graph_id("b").unwrap());
        let app = Destination::new("product-knowledge").unwrap();
        assert_eq!(app.graph_id("a").unwrap(), "product-knowledge");
        assert_eq!(app.graph_id("b").unwrap(), "product-knowledge");
    }

    #[test]
    fn application_names_are_literal() {
        let d = Destination::new("global/x").unwrap();
        assert_eq!(d.graph_id("op").unwrap(), "global/x");
        assert!(!d.is_packaged());
        assert_ne!(
            d.physical_graph("op").unwrap(),
            Destination::global().physical_graph("op").unwrap()
        );
    }

    #[test]
    fn physical_names_encode_the_logical_id_once() {
        let p = Destination::personal();
        assert_eq!(
            p.physical_graph("a").unwrap(),
            format!("g_{}", hex::encode("personal/a"))
        );
        // a-b and a_b stay distinct.
        let a = Destination::new("a-b")
            .unwrap()
            .physical_graph("o")
            .unwrap();
        let b = Destination::new("a_b")
            .unwrap()
            .physical_graph("o")
            .unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn reserved_prefixes_blank_and_retired_names_are_rejected() {
        for bad in ["personal/x", "operator/x", "", "  ", " pad", "pad "] {
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
        let p = Destination::personal();
        assert!(p.graph_id("").is_err());
        assert!(p.graph_id("personal/bob").is_err());
        assert!(p.graph_id("operator/bob").is_err());
        assert!(Destination::global().graph_id(" ").is_err());
        assert!(p.graph_id("a\0b").is_err());
        assert!(p.graph_id(&"o".repeat(MAX_NAME_BYTES + 1)).is_err());
        assert!(p.graph_id(&"o".repeat(MAX_NAME_BYTES)).is_ok());
    }
}
