//! Names and limits of the stored model that the storages and the engine share.

/// The relation type of a generic fact, and of a fact whose type is unusable.
pub const GENERIC_RELATION_TYPE: &str = "RELATES_TO";

/// The property that marks nodes and relationships as owned by a replace-graph Lens
/// (the storages' `OWNER_PROPERTY`).
pub const OWNER_KEY: &str = "_gralkor_lens";

/// The most results one search scope may return (a search request's limit, a
/// memory search's results per Destination).
pub const MAX_SEARCH_LIMIT: usize = 200;
