//! Validation and resolution of requests, shared by every [`Client`](super::Client)
//! implementation so they accept and reject exactly the same input.
//!
//! Each function checks a request against one runtime [`Snapshot`] and returns what
//! it resolves to, or an [`Error::InvalidInput`] naming the field and the rule.
//! Nothing here touches storage.

use std::collections::HashSet;

use super::request::{
    BuildCommunities, EpisodeRef, ExtractPending, MemoryAdd, Replace, Route, Search,
};
use crate::lens::{Ingest, Lens};
use crate::ontology::is_identifier;
use crate::provenance::Writer;
use crate::runtime::Snapshot;
use crate::storage::{
    GraphId, GraphQuery, OperatorId, ResultType, validate_content, validate_max_results,
    validate_query, validate_source_description,
};
use crate::{Error, Result};

/// A resolved Destination: its name and its logical graph for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The Destination's name.
    pub destination: String,
    /// The graph.
    pub graph: GraphId,
}

fn target(
    snapshot: &Snapshot,
    field: &str,
    name: &str,
    operator_id: &OperatorId,
) -> Result<Target> {
    let d = snapshot.destination(field, name)?;
    Ok(Target {
        destination: d.name().to_string(),
        graph: d.graph_id(operator_id)?,
    })
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
    request.check()?;
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
    /// The query, run once over every target's graph.
    pub query: GraphQuery,
}

/// Checks a search completely (before any query) and resolves its Destinations.
pub fn validate_search(request: &Search, snapshot: &Snapshot) -> Result<SearchPlan> {
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
        // `ResultType` is non-exhaustive (it lives in the storage port's crate).
        _ => {
            return Err(Error::invalid(
                "result_type",
                "is not a result type this version of gralkor supports",
            ));
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

    if request.as_of.is_some()
        && matches!(
            request.result_type,
            ResultType::Nodes { .. } | ResultType::Artefacts { .. }
        )
    {
        return Err(Error::invalid(
            "as_of",
            format!(
                "applies to episode and fact results only (they have times), not to {}",
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

    let targets = destinations(snapshot, &request.destinations, &request.operator_id)?;

    Ok(SearchPlan {
        targets,
        query: GraphQuery::new(
            request.query.clone(),
            request.result_type.clone(),
            request.max_results,
        )
        .lenses(lenses)
        .as_of(request.as_of),
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

/// Checks an extraction request and resolves its Destinations (distinct, in order;
/// every accessible one when none is named).
pub fn validate_extract_pending(
    request: &ExtractPending,
    snapshot: &Snapshot,
) -> Result<Vec<Target>> {
    destinations(snapshot, &request.destinations, &request.operator_id)
}

/// The Destinations a selector names (distinct, requested order), or every accessible
/// one when it is empty.
fn destinations(
    snapshot: &Snapshot,
    names: &[String],
    operator: &OperatorId,
) -> Result<Vec<Target>> {
    let mut targets = Vec::new();
    if names.is_empty() {
        for d in snapshot.destinations() {
            targets.push(Target {
                destination: d.name().to_string(),
                graph: d.graph_id(operator)?,
            });
        }
    } else {
        let mut seen = HashSet::new();
        for (i, name) in names.iter().enumerate() {
            let t = target(snapshot, &format!("destinations[{i}]"), name, operator)?;
            if seen.insert(t.destination.clone()) {
                targets.push(t);
            }
        }
    }
    Ok(targets)
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
    validate_content("content", &request.content)?;
    if let Some(session) = &request.session_id {
        crate::storage::check_session_id("session_id", session)?;
    }
    crate::lens::check_instructions(
        "custom_instructions",
        request.custom_instructions.as_deref(),
    )?;
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
    target(
        snapshot,
        "destination",
        &request.destination,
        &request.operator_id,
    )
}
