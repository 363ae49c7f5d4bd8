//! The shared vocabulary: the few words the memory API, the storage port and the
//! engine all speak, so that none of them has to import another to say them. It
//! imports no other room (the shared [`Error`](crate::Error) aside).
//!
//! * [`time`] — [`Timestamp`] and the rule of a fact being true at an instant
//!   ([`times_current`]).
//! * [`content`] — [`SourceKind`], the content and source-description limits, and
//!   content's one rule, [`check_content`].
//! * [`ids`] — [`derived_uuid`] (every replay-safe uuid) and the physical graph name
//!   of a logical graph ([`physical_graph_name`]).
//! * [`model`] — names and limits of the stored model: the generic relation type,
//!   the ownership property, the search limit.
//! * [`value`] — what a value sent to the database may be (no NUL, no number
//!   without a literal).
//! * [`status`] — what a backend reports: [`GraphStatus`], [`ServerInfo`].

pub mod content;
pub mod ids;
pub mod model;
pub mod status;
pub mod time;
pub mod value;

pub use content::{MAX_CONTENT_BYTES, MAX_SOURCE_DESCRIPTION_BYTES, SourceKind, check_content};
pub use ids::GRAPH_PREFIX;
pub use ids::{derived_uuid, physical_graph_name};
pub use model::{GENERIC_RELATION_TYPE, MAX_SEARCH_LIMIT, OWNER_KEY};
pub use status::{GraphStatus, ServerInfo};
pub use time::{FactTimes, Timestamp, times_current};
pub use value::is_identifier;
