//! Runtime configuration: Destinations, Lenses and Reflections as one immutable,
//! validated [`Snapshot`], held by a [`Runtime`] whose replacement is atomic.
//!
//! A [`RuntimeConfig`] lists the consumer's own definitions; the packaged ones are
//! always installed alongside and cannot be redefined: Destinations `personal` and
//! `global`, the Lens `personal-chat`, and the Reflection names `generalisations` and
//! `erl` (reserved for the packaged Reflections). [`RuntimeConfig::build`] checks
//! everything and names what is wrong in an [`Error::Config`] (`field` says where,
//! `rule` what):
//!
//! * blank names, names with surrounding whitespace, duplicates;
//! * names that no operation could use: NUL characters, more than
//!   [`MAX_NAME_BYTES`] (256) bytes;
//! * reserved names: packaged names, Destinations beginning `personal/` or
//!   `operator/`, session group names (`session-<id>`: they exist per conversation,
//!   unregistered), Lens and Reflection names containing a provenance delimiter;
//! * retired names: the `operator` Destination and the `operator` and `default`
//!   Lenses, with migration guidance;
//! * dangling references: a Lens or Reflection output naming an unregistered
//!   Destination;
//! * malformed Reflection chains of thought.
//!
//! Ontologies with protected names (`Entity`, `Episodic`, `Community`) cannot reach a
//! snapshot at all: [`Ontology`](crate::ontology::Ontology) refuses them when built.
//!
//! [`Runtime::replace`] validates the new configuration completely before swapping it
//! in; an invalid one returns the error and leaves the old snapshot in force. An
//! operation takes [`Runtime::snapshot`] (an `Arc`) once when it starts and keeps
//! using it, so a replacement never changes an operation half way.
//!
//! ```
//! use gralkor::lens::Lens;
//! use gralkor::runtime::{Runtime, RuntimeConfig};
//!
//! let runtime = Runtime::new(
//!     RuntimeConfig::new()
//!         .destination("product-knowledge")
//!         .lens(Lens::appending("observations", "global"))
//!         .lens(Lens::replace_graph("systems", "product-knowledge")),
//! )?;
//! let before = runtime.snapshot();
//! let names: Vec<_> = before.destinations().iter().map(|d| d.name()).collect();
//! assert_eq!(names, ["personal", "global", "product-knowledge"]);
//!
//! // An invalid replacement leaves the old snapshot in force.
//! let err = runtime
//!     .replace(RuntimeConfig::new().lens(Lens::appending("x", "nowhere")))
//!     .unwrap_err();
//! assert!(err.to_string().contains("lenses[x].destination"));
//! assert!(runtime.snapshot().lens("lens", "observations").is_ok());
//! # Ok::<(), gralkor::Error>(())
//! ```

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use crate::destination::{self, Destination, GLOBAL, PERSONAL, RETIRED_OPERATOR};
use crate::lens::{Lens, PERSONAL_CHAT, RETIRED_LENS_NAMES};
use crate::provenance::check_writer_name;
use crate::reflection::{PACKAGED_REFLECTIONS, Reflection};
use crate::storage::{MAX_NAME_BYTES, check_name_text};
use crate::{Error, Result};

/// The consumer's Destinations, Lenses and Reflections, before validation.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    destinations: Vec<String>,
    lenses: Vec<Lens>,
    reflections: Vec<Reflection>,
}

impl RuntimeConfig {
    /// No consumer definitions (the packaged ones are always installed).
    pub fn new() -> RuntimeConfig {
        RuntimeConfig::default()
    }

    /// Registers an application Destination by name.
    pub fn destination(mut self, name: impl Into<String>) -> Self {
        self.destinations.push(name.into());
        self
    }

    /// Registers a Lens.
    pub fn lens(mut self, lens: impl Into<Lens>) -> Self {
        self.lenses.push(lens.into());
        self
    }

    /// Declares a Reflection.
    pub fn reflection(mut self, reflection: Reflection) -> Self {
        self.reflections.push(reflection);
        self
    }

    /// Validates everything and resolves it into a snapshot (with the packaged
    /// definitions first).
    pub fn build(self) -> Result<Snapshot> {
        let mut destinations = vec![Destination::personal(), Destination::global()];
        let mut seen: HashSet<String> = destinations.iter().map(|d| d.name().into()).collect();
        for (i, name) in self.destinations.into_iter().enumerate() {
            let field = format!("destinations[{i}]");
            if name == PERSONAL || name == GLOBAL {
                return Err(Error::config(
                    field,
                    format!("`{name}` is a packaged Destination and cannot be redefined"),
                ));
            }
            let dest = Destination::new(name.clone()).map_err(|e| as_config(e, &field))?;
            if dest.is_session_group() {
                return Err(Error::config(
                    field,
                    format!(
                        "`{name}` is a session group name (`session-<session id>`): session groups exist per conversation and are not registered"
                    ),
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(Error::config(
                    field,
                    format!("`{name}` is registered twice"),
                ));
            }
            destinations.push(dest);
        }

        let mut lenses = vec![Lens::personal_chat()];
        let mut lens_names: HashSet<String> = HashSet::from([PERSONAL_CHAT.to_string()]);
        for (i, lens) in self.lenses.into_iter().enumerate() {
            let field = format!("lenses[{}]", display_name(lens.name(), i));
            check_writer_name(&format!("{field}.name"), lens.name())
                .map_err(|e| as_config(e, ""))?;
            if lens.name() == PERSONAL_CHAT {
                return Err(Error::config(
                    format!("{field}.name"),
                    "`personal-chat` is a packaged Lens and cannot be redefined",
                ));
            }
            if let Some((_, guidance)) = RETIRED_LENS_NAMES.iter().find(|(n, _)| *n == lens.name())
            {
                return Err(Error::config(
                    format!("{field}.name"),
                    format!("`{}` {guidance}", lens.name()),
                ));
            }
            if !lens_names.insert(lens.name().to_string()) {
                return Err(Error::config(
                    format!("{field}.name"),
                    format!("`{}` is registered twice", lens.name()),
                ));
            }
            check_reference(
                &destinations,
                &format!("{field}.destination"),
                lens.destination(),
            )?;
            lenses.push(lens);
        }

        let mut reflections = Vec::new();
        let mut reflection_names = HashSet::new();
        for (i, reflection) in self.reflections.into_iter().enumerate() {
            let field = format!("reflections[{}]", display_name(reflection.name(), i));
            check_writer_name(&format!("{field}.name"), reflection.name())
                .map_err(|e| as_config(e, ""))?;
            if PACKAGED_REFLECTIONS.contains(&reflection.name()) {
                return Err(Error::config(
                    format!("{field}.name"),
                    format!(
                        "`{}` is reserved for a packaged Reflection and cannot be redefined",
                        reflection.name()
                    ),
                ));
            }
            if !reflection_names.insert(reflection.name().to_string()) {
                return Err(Error::config(
                    format!("{field}.name"),
                    format!("`{}` is declared twice", reflection.name()),
                ));
            }
            reflection.validate_outputs(&field)?;
            check_reference(
                &destinations,
                &format!("{field}.destination"),
                reflection.destination(),
            )?;
            reflection.validate_steps(&field)?;
            reflections.push(reflection);
        }

        Ok(Snapshot {
            destinations,
            lenses,
            reflections,
        })
    }
}

/// How an entry is named in a field: by its name when that is printable and short, by
/// its index otherwise (blank, bracketed, control characters, over-long).
fn display_name(name: &str, index: usize) -> String {
    if name.trim().is_empty()
        || name.contains(['[', ']'])
        || name.chars().any(char::is_control)
        || name.len() > MAX_NAME_BYTES
    {
        index.to_string()
    } else {
        name.to_string()
    }
}

/// Re-labels an input error as a configuration error; `field` replaces the error's
/// field unless empty.
fn as_config(e: Error, field: &str) -> Error {
    match e {
        Error::InvalidInput { field: f, rule } => Error::config(
            if field.is_empty() {
                f
            } else {
                field.to_string()
            },
            rule,
        ),
        other => other,
    }
}

fn check_reference(destinations: &[Destination], field: &str, name: &str) -> Result<()> {
    check_name_text(field, name).map_err(|e| as_config(e, ""))?;
    if name == RETIRED_OPERATOR {
        return Err(Error::config(
            field,
            format!("`{RETIRED_OPERATOR}` {}", destination::OPERATOR_MIGRATION),
        ));
    }
    if destinations.iter().any(|d| d.name() == name) {
        Ok(())
    } else {
        Err(Error::config(
            field,
            format!(
                "names unknown Destination `{name}` (registered: {})",
                destinations
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

/// One validated, immutable runtime configuration: the packaged definitions plus the
/// consumer's.
#[derive(Debug, Clone)]
pub struct Snapshot {
    destinations: Vec<Destination>,
    lenses: Vec<Lens>,
    reflections: Vec<Reflection>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot::packaged()
    }
}

impl Snapshot {
    /// Only the packaged definitions.
    pub fn packaged() -> Snapshot {
        RuntimeConfig::new()
            .build()
            .expect("the packaged definitions are valid")
    }

    /// Every registered Destination, packaged first (`personal`, `global`), then the
    /// consumer's in registration order. This is the order of a selector-free search.
    pub fn destinations(&self) -> &[Destination] {
        &self.destinations
    }

    /// Every registered Lens, `personal-chat` first.
    pub fn lenses(&self) -> &[Lens] {
        &self.lenses
    }

    /// Every declared Reflection.
    pub fn reflections(&self) -> &[Reflection] {
        &self.reflections
    }

    /// The registered Destination `name`, or the session group it names
    /// (`session-<id>`, see [`Destination::session_group`]); `field` names the
    /// argument in the error (unknown, blank, reserved or retired names).
    pub fn destination(&self, field: &str, name: &str) -> Result<Destination> {
        destination::check_name(field, name)?;
        if let Some(group) = Destination::session_group_named(field, name) {
            return group;
        }
        self.destinations
            .iter()
            .find(|d| d.name() == name)
            .cloned()
            .ok_or_else(|| {
                Error::invalid(
                    field,
                    format!("names no registered Destination (got `{name}`)"),
                )
            })
    }

    /// The registered Lens `name`; `field` names the argument in the error.
    pub fn lens(&self, field: &str, name: &str) -> Result<&Lens> {
        if name.trim().is_empty() {
            return Err(Error::invalid(field, "must not be blank"));
        }
        check_name_text(field, name)?;
        if let Some((_, guidance)) = RETIRED_LENS_NAMES.iter().find(|(n, _)| *n == name) {
            return Err(Error::invalid(field, format!("`{name}` {guidance}")));
        }
        self.lenses
            .iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| {
                Error::invalid(field, format!("names no registered Lens (got `{name}`)"))
            })
    }

    /// The declared Reflection `name`; `field` names the argument in the error.
    pub fn reflection(&self, field: &str, name: &str) -> Result<&Reflection> {
        check_name_text(field, name)?;
        self.reflections
            .iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    field,
                    format!("names no declared Reflection (got `{name}`)"),
                )
            })
    }
}

/// Holds the current [`Snapshot`]; replacement is atomic.
#[derive(Debug)]
pub struct Runtime {
    current: RwLock<Arc<Snapshot>>,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::packaged()
    }
}

impl Runtime {
    /// A runtime holding the validated `config`.
    pub fn new(config: RuntimeConfig) -> Result<Runtime> {
        Ok(Runtime::from_snapshot(config.build()?))
    }

    /// A runtime holding only the packaged definitions.
    pub fn packaged() -> Runtime {
        Runtime::from_snapshot(Snapshot::packaged())
    }

    /// A runtime holding `snapshot`.
    pub fn from_snapshot(snapshot: Snapshot) -> Runtime {
        Runtime {
            current: RwLock::new(Arc::new(snapshot)),
        }
    }

    /// The current snapshot. Operations take it once and keep it.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Validates `config` completely, then makes it current in one step. On error the
    /// old snapshot stays in force. Operations already running keep the snapshot they
    /// started with.
    pub fn replace(&self, config: RuntimeConfig) -> Result<()> {
        let next = Arc::new(config.build()?);
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
