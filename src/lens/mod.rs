//! Lenses: named ingestion channels into a Destination.
//!
//! A [`Lens`] is one of two kinds ([`LensWrite`]):
//!
//! * **Appending** ([`Lens::appending`]): a Destination, an extraction [`Ontology`]
//!   (default: the open generic ontology, [`Ontology::generic`]) and an ingestion
//!   process ([`Ingestion`]). [`Client::ingest`](crate::client::Client::ingest) hands
//!   the process the validated [`Ingest`] request and a Lens-bound [`LensStore`]; the
//!   process decides whether to make zero, one or many writes with
//!   [`LensStore::add`], and may read with [`LensStore::search`]. The built-in process,
//!   `StoreIngestion`, writes the request straight through, once. Every episode a
//!   Lens writes goes to the Lens's Destination, is extracted with the Lens's ontology,
//!   and ends its source description with ` [lens: <name>]`
//!   ([provenance](crate::provenance)).
//! * **Replace-graph** ([`Lens::replace_graph`]): a Destination only.
//!   [`Client::replace`](crate::client::Client::replace) validates a whole [`Graph`] in
//!   full, then removes every node and relationship this Lens owned at its Destination
//!   (marked with the owner property `_gralkor_lens` = the Lens name) and inserts the new graph with
//!   the same mark. Content of other Lenses, Reflections and unowned content is never
//!   touched; an empty graph clears the Lens's content. **The replacement is
//!   atomic**: the Lens's graph is the old one or the new one, never a mix — a refused
//!   request changes nothing, and on FalkorDB the swap is one statement
//!   (`graph::replace_owned`).
//!
//! The packaged `personal-chat` Lens ([`Lens::personal_chat`]) appends
//! to the `personal` Destination with the generic ontology and the built-in process.
//!
//! ```
//! use gralkor::lens::{Ingest, Ingestion, Lens, LensStore};
//! use gralkor::ontology::{EntityMode, EntityType, Ontology, RelationshipMode};
//!
//! /// Writes each non-empty paragraph of a document as its own episode.
//! #[derive(Debug)]
//! struct Paragraphs;
//!
//! impl Ingestion for Paragraphs {
//!     async fn ingest(&self, request: &Ingest, store: &LensStore) -> gralkor::Result<()> {
//!         let text = request.content.text().unwrap_or_default();
//!         for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
//!             store.add(gralkor::client::Content::document(para), &request.source_description).await?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let ontology = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
//!     .entity(EntityType::new("Decision"))
//!     .build()?;
//! let lens: Lens = Lens::appending("decisions", "global")
//!     .ontology(ontology)
//!     .ingestion(Paragraphs)
//!     .into();
//! assert_eq!(lens.destination(), "global");
//! assert!(lens.ontology().is_some());
//! let systems = Lens::replace_graph("systems", "global");
//! assert!(systems.is_replace_graph());
//! # Ok::<(), gralkor::Error>(())
//! ```

mod ingest;
mod store;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub(crate) use ingest::check_instructions;
pub use ingest::{Ingest, IngestedRepresentation};
pub use store::LensStore;

/// The replace-graph payload lives with the storage; re-exported here, where
/// replace-graph Lenses are described.
#[doc(no_inline)]
pub use crate::storage::{Graph, GraphNode, GraphRelationship};
internal_use!(crate::storage::{MAX_REPLACEMENT_BYTES, OWNER_PROPERTY, RESERVED_PROPERTY_PREFIX});

use crate::Result;
use crate::destination::PERSONAL;
use crate::ontology::Ontology;

/// The packaged Lens that appends conversation to the operator's `personal` graph.
pub(crate) const PERSONAL_CHAT: &str = "personal-chat";

/// Lens names of earlier versions that are rejected, with what to use instead.
pub(crate) const RETIRED_LENS_NAMES: [(&str, &str); 2] = [
    (
        "operator",
        "is retired: use the packaged `personal-chat` Lens (Destination `personal`)",
    ),
    (
        "default",
        "is retired and is not an alias: use the packaged `personal-chat` Lens",
    ),
];

/// An ingestion process: what an appending Lens does with a request.
///
/// It receives the validated request and a store bound to the operator and the Lens,
/// and decides how many episodes to write (zero, one or many) through
/// [`LensStore::add`]. An error is returned to the caller as is; gralkor makes no
/// fallback write. Implement it with a plain `async fn` (the future must be `Send`,
/// which it is unless it holds something like an `Rc` across an `.await`):
///
/// ```
/// use gralkor::lens::{Ingest, Ingestion, Lens, LensStore};
/// use gralkor::storage::Content;
///
/// /// Writes the text twice: once as given, once upper-cased.
/// #[derive(Debug)]
/// struct Loud;
///
/// impl Ingestion for Loud {
///     async fn ingest(&self, request: &Ingest, store: &LensStore) -> gralkor::Result<()> {
///         let text = request.content.text().unwrap_or_default();
///         store.add(Content::document(text), &request.source_description).await?;
///         store.add(Content::document(text.to_uppercase()), "shouted").await?;
///         Ok(())
///     }
/// }
///
/// let lens: Lens = Lens::appending("loud", "global").ingestion(Loud).into();
/// assert!(lens.ingestion().is_some());
/// ```
pub trait Ingestion: Send + Sync + fmt::Debug {
    /// Ingests one request.
    fn ingest(
        &self,
        request: &Ingest,
        store: &LensStore,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The object-safe form of [`Ingestion`], implemented for every `Ingestion`: what a
/// [`Lens`] holds, so one process can be shared by several Lenses
/// ([`AppendingLens::shared_ingestion`]). Implement [`Ingestion`], not this.
pub trait DynIngestion: Send + Sync + fmt::Debug {
    /// [`Ingestion::ingest`], boxed.
    fn ingest_boxed<'a>(
        &'a self,
        request: &'a Ingest,
        store: &'a LensStore,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;
}

impl<T: Ingestion> DynIngestion for T {
    fn ingest_boxed<'a>(
        &'a self,
        request: &'a Ingest,
        store: &'a LensStore,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>> {
        Box::pin(self.ingest(request, store))
    }
}

/// The built-in ingestion process: writes the request's content and source
/// description straight through, as one episode.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StoreIngestion;

impl Ingestion for StoreIngestion {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        store
            .add(request.content.clone(), &request.source_description)
            .await
            .map(|_| ())
    }
}

/// How a Lens writes.
#[derive(Clone, Debug)]
pub enum LensWrite {
    /// Episodes through an ingestion process, extracted with an ontology.
    Append {
        /// The extraction ontology of every episode this Lens writes.
        ontology: Ontology,
        /// The ingestion process.
        ingestion: Arc<dyn DynIngestion>,
    },
    /// Whole-graph replacement of the Lens's own nodes and relationships.
    ReplaceGraph,
}

/// A Lens definition. Built with [`Lens::appending`] (then converted with `into()`),
/// [`Lens::replace_graph`] or [`Lens::personal_chat`]; names are checked when the
/// [runtime configuration](crate::runtime::RuntimeConfig) is built.
#[derive(Clone, Debug)]
pub struct Lens {
    name: String,
    destination: String,
    write: LensWrite,
    custom_instructions: Option<String>,
}

/// Builder of an appending Lens; converts into a [`Lens`].
#[derive(Clone, Debug)]
pub struct AppendingLens {
    name: String,
    destination: String,
    ontology: Ontology,
    ingestion: Arc<dyn DynIngestion>,
    custom_instructions: Option<String>,
}

impl AppendingLens {
    /// Extracts every episode this Lens writes with these extra instructions (the
    /// seeds' `customInstructions`), appended to the engine's extraction prompt; a
    /// request's own ([`Ingest::custom_instructions`]) take their place.
    pub fn custom_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.custom_instructions = Some(instructions.into());
        self
    }

    /// Extracts with `ontology` instead of the open generic one.
    pub fn ontology(mut self, ontology: Ontology) -> Self {
        self.ontology = ontology;
        self
    }

    /// Uses `ingestion` instead of the built-in `StoreIngestion`.
    pub fn ingestion(mut self, ingestion: impl Ingestion + 'static) -> Self {
        self.ingestion = Arc::new(ingestion);
        self
    }

    /// Uses a shared ingestion process.
    pub fn shared_ingestion(mut self, ingestion: Arc<dyn DynIngestion>) -> Self {
        self.ingestion = ingestion;
        self
    }
}

impl From<AppendingLens> for Lens {
    fn from(b: AppendingLens) -> Lens {
        Lens {
            name: b.name,
            destination: b.destination,
            write: LensWrite::Append {
                ontology: b.ontology,
                ingestion: b.ingestion,
            },
            custom_instructions: b.custom_instructions,
        }
    }
}

impl Lens {
    /// An appending Lens writing to `destination` with the open generic ontology and
    /// the built-in `StoreIngestion`; refine it with the builder methods.
    pub fn appending(name: impl Into<String>, destination: impl Into<String>) -> AppendingLens {
        AppendingLens {
            name: name.into(),
            destination: destination.into(),
            ontology: Ontology::generic(),
            ingestion: Arc::new(StoreIngestion),
            custom_instructions: None,
        }
    }

    /// A replace-graph Lens owning its content at `destination`.
    pub fn replace_graph(name: impl Into<String>, destination: impl Into<String>) -> Lens {
        Lens {
            name: name.into(),
            destination: destination.into(),
            write: LensWrite::ReplaceGraph,
            custom_instructions: None,
        }
    }

    /// The packaged `personal-chat` Lens: appends to `personal` with the generic
    /// ontology and the built-in process.
    pub fn personal_chat() -> Lens {
        Lens::appending(PERSONAL_CHAT, PERSONAL).into()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Destination's name.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// How it writes.
    pub fn write(&self) -> &LensWrite {
        &self.write
    }

    /// Whether it is a replace-graph Lens.
    pub fn is_replace_graph(&self) -> bool {
        matches!(self.write, LensWrite::ReplaceGraph)
    }

    /// The extraction ontology of an appending Lens.
    pub fn ontology(&self) -> Option<&Ontology> {
        match &self.write {
            LensWrite::Append { ontology, .. } => Some(ontology),
            LensWrite::ReplaceGraph => None,
        }
    }

    /// The extra extraction instructions of an appending Lens
    /// ([`AppendingLens::custom_instructions`]).
    pub fn custom_instructions(&self) -> Option<&str> {
        self.custom_instructions.as_deref()
    }

    /// The ingestion process of an appending Lens.
    pub fn ingestion(&self) -> Option<&Arc<dyn DynIngestion>> {
        match &self.write {
            LensWrite::Append { ingestion, .. } => Some(ingestion),
            LensWrite::ReplaceGraph => None,
        }
    }
}
