//! Validation and resolution of requests, shared by every [`Client`](super::Client)
//! implementation so they accept and reject exactly the same input.
//!
//! Each function checks a request against one runtime [`Snapshot`] and returns what
//! it resolves to, or an [`Error::InvalidInput`] naming the field and the rule.
//! Nothing here touches storage.

use std::collections::HashSet;

use super::request::{
    BuildCommunities, Content, EpisodeRef, Ingest, MAX_RESULTS_LIMIT, MemoryAdd, Replace,
    ResultType, Route, Search,
};
use super::storage::GraphQuery;
use crate::destination::validate_operator_id;
use crate::falkordb::is_identifier;
use crate::graph::{MAX_CONTENT_BYTES, MAX_SOURCE_DESCRIPTION_BYTES};
use crate::lens::Lens;
use crate::provenance::{self, Writer};
use crate::runtime::Snapshot;
use crate::{Error, Result};

/// A resolved Destination: its name and its logical graph for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The Destination's name.
    pub destination: String,
    /// The logical graph id.
    pub graph: String,
}

fn target(snapshot: &Snapshot, field: &str, name: &str, operator_id: &str) -> Result<Target> {
    let d = snapshot.destination(field, name)?;
    Ok(Target {
        destination: d.name().to_string(),
        graph: d.graph_id(operator_id)?,
    })
}

/// Checks content against its kind: non-blank text for conversations and documents, a
/// non-empty JSON object or array for structured records; no NUL characters; at most
/// [`MAX_CONTENT_BYTES`] bytes as stored.
pub fn validate_content(field: &str, content: &Content) -> Result<()> {
    let encoded = content.encoded();
    if encoded.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    if encoded.len() > MAX_CONTENT_BYTES {
        return Err(Error::invalid(
            field,
            format!("must be at most {MAX_CONTENT_BYTES} bytes as stored"),
        ));
    }
    match content {
        Content::Conversation(t) | Content::Document(t) if t.trim().is_empty() => Err(
            Error::invalid(field, format!("{} text must not be blank", content.kind())),
        ),
        Content::Conversation(_) | Content::Document(_) => Ok(()),
        Content::StructuredRecord(v) => match v {
            serde_json::Value::Object(m) if !m.is_empty() => Ok(()),
            serde_json::Value::Array(a) if !a.is_empty() => Ok(()),
            serde_json::Value::Object(_) | serde_json::Value::Array(_) => Err(Error::invalid(
                field,
                "a structured record must not be empty",
            )),
            _ => Err(Error::invalid(
                field,
                "a structured record must be a JSON object or array",
            )),
        },
    }
}

/// Checks a caller's source description that will be stored with `writer`'s marker:
/// no NUL characters, and at most [`MAX_SOURCE_DESCRIPTION_BYTES`] bytes with the
/// marker.
pub fn validate_source_description(field: &str, description: &str, writer: &Writer) -> Result<()> {
    if description.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    let stored = match writer {
        Writer::Lens(name) => provenance::lens_description(description, name),
        Writer::Direct => provenance::direct_description(description),
        Writer::Reflection(name) => provenance::reflection_description(name),
    };
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
pub(crate) fn validate_query(field: &str, query: &str) -> Result<()> {
    if query.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    if query.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}

/// Checks a per-graph result count: 1 to [`MAX_RESULTS_LIMIT`].
pub(crate) fn validate_max_results(field: &str, n: usize) -> Result<()> {
    if n == 0 || n > MAX_RESULTS_LIMIT {
        return Err(Error::invalid(
            field,
            format!("must be between 1 and {MAX_RESULTS_LIMIT} (got {n})"),
        ));
    }
    Ok(())
}

fn appending_lens<'s>(snapshot: &'s Snapshot, name: &str) -> Result<&'s Lens> {
    let lens = snapshot.lens("lens", name)?;
    if lens.is_replace_graph() {
        return Err(Error::invalid(
            "lens",
            format!("`{name}` is a replace-graph Lens: it accepts only whole-graph replacement"),
        ));
    }
    Ok(lens)
}

/// Checks an ingestion request and resolves its appending Lens.
pub fn validate_ingest<'s>(request: &Ingest, snapshot: &'s Snapshot) -> Result<&'s Lens> {
    if request.id.trim().is_empty() {
        return Err(Error::invalid("id", "must not be blank"));
    }
    if request.id.contains('\0') {
        return Err(Error::invalid("id", "must not contain NUL characters"));
    }
    validate_operator_id("operator_id", &request.operator_id)?;
    validate_content("content", &request.content)?;
    let lens = appending_lens(snapshot, &request.lens)?;
    validate_source_description(
        "source_description",
        &request.source_description,
        &Writer::Lens(lens.name().to_string()),
    )?;
    Ok(lens)
}

/// Checks a replacement (the whole graph included) and resolves its replace-graph
/// Lens.
pub fn validate_replace<'s>(request: &Replace, snapshot: &'s Snapshot) -> Result<&'s Lens> {
    validate_operator_id("operator_id", &request.operator_id)?;
    let lens = snapshot.lens("lens", &request.lens)?;
    if !lens.is_replace_graph() {
        return Err(Error::invalid(
            "lens",
            format!(
                "`{}` is an appending Lens: it accepts only episode ingestion",
                lens.name()
            ),
        ));
    }
    request.graph.validate()?;
    Ok(lens)
}

/// A validated search: the graphs to search, in order, and the per-graph query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPlan {
    /// Distinct Destinations in requested order (or every accessible one).
    pub targets: Vec<Target>,
    /// The query each graph runs.
    pub query: GraphQuery,
}

/// Checks a search completely (before any query) and resolves its Destinations.
pub fn validate_search(request: &Search, snapshot: &Snapshot) -> Result<SearchPlan> {
    validate_operator_id("operator_id", &request.operator_id)?;
    let lookup_by_id = matches!(
        request.result_type,
        ResultType::Artefacts {
            artefact_id: Some(_)
        }
    );
    if !(lookup_by_id && request.query.trim().is_empty()) {
        validate_query("query", &request.query)?;
    }
    validate_max_results("max_results", request.max_results)?;
    match &request.result_type {
        ResultType::Episodes => {}
        ResultType::Facts { edge_types } => check_types("result_type.edge_types", edge_types)?,
        ResultType::Nodes { entity_types } => {
            check_types("result_type.entity_types", entity_types)?
        }
        ResultType::Artefacts { artefact_id } => {
            if matches!(artefact_id, Some(id) if id.trim().is_empty()) {
                return Err(Error::invalid(
                    "result_type.artefact_id",
                    "must not be blank when set",
                ));
            }
            if matches!(artefact_id, Some(id) if id.contains('\0')) {
                return Err(Error::invalid(
                    "result_type.artefact_id",
                    "must not contain NUL characters",
                ));
            }
        }
    }
    if !request.lenses.is_empty()
        && matches!(
            request.result_type,
            ResultType::Nodes { .. } | ResultType::Artefacts { .. }
        )
    {
        return Err(Error::invalid(
            "lenses",
            format!(
                "a Lens selector applies to episode and fact results only, not to {}",
                request.result_type.as_str()
            ),
        ));
    }

    let mut seen = HashSet::new();
    let mut lenses = Vec::new();
    for (i, name) in request.lenses.iter().enumerate() {
        snapshot.lens(&format!("lenses[{i}]"), name)?;
        if seen.insert(name.as_str()) {
            lenses.push(name.clone());
        }
    }

    let mut targets = Vec::new();
    if request.destinations.is_empty() {
        for d in snapshot.destinations() {
            targets.push(Target {
                destination: d.name().to_string(),
                graph: d.graph_id(&request.operator_id)?,
            });
        }
    } else {
        let mut seen = HashSet::new();
        for (i, name) in request.destinations.iter().enumerate() {
            let t = target(
                snapshot,
                &format!("destinations[{i}]"),
                name,
                &request.operator_id,
            )?;
            if seen.insert(t.destination.clone()) {
                targets.push(t);
            }
        }
    }

    Ok(SearchPlan {
        targets,
        query: GraphQuery {
            query: request.query.clone(),
            result_type: request.result_type.clone(),
            lenses,
            limit: request.max_results,
        },
    })
}

fn check_types(field: &str, types: &[String]) -> Result<()> {
    for (i, t) in types.iter().enumerate() {
        if !is_identifier(t) {
            return Err(Error::invalid(
                format!("{field}[{i}]"),
                format!("must be an identifier (got `{t}`)"),
            ));
        }
    }
    Ok(())
}

/// Where a validated `memory_add` writes.
#[derive(Debug, Clone)]
pub enum MemoryAddPlan {
    /// Directly to this graph.
    Direct(Target),
    /// Through this appending Lens.
    Lens(Lens),
}

/// Checks a `memory_add` and resolves its route.
pub fn validate_memory_add(request: &MemoryAdd, snapshot: &Snapshot) -> Result<MemoryAddPlan> {
    validate_operator_id("operator_id", &request.operator_id)?;
    validate_content("content", &request.content)?;
    let plan = match &request.route {
        Route::Direct(name) => MemoryAddPlan::Direct(target(
            snapshot,
            "route.destination",
            name,
            &request.operator_id,
        )?),
        Route::Lens(name) => MemoryAddPlan::Lens(appending_lens(snapshot, name)?.clone()),
    };
    let writer = match &plan {
        MemoryAddPlan::Direct(_) => Writer::Direct,
        MemoryAddPlan::Lens(lens) => Writer::Lens(lens.name().to_string()),
    };
    validate_source_description("source_description", &request.source_description, &writer)?;
    Ok(plan)
}

/// Checks an episode reference and resolves its graph.
pub fn validate_episode_ref(request: &EpisodeRef, snapshot: &Snapshot) -> Result<Target> {
    validate_operator_id("operator_id", &request.operator_id)?;
    target(
        snapshot,
        "destination",
        &request.destination,
        &request.operator_id,
    )
}

/// Checks a community-detection request and resolves its graph.
pub fn validate_build_communities(
    request: &BuildCommunities,
    snapshot: &Snapshot,
) -> Result<Target> {
    validate_operator_id("operator_id", &request.operator_id)?;
    target(
        snapshot,
        "destination",
        &request.destination,
        &request.operator_id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
