//! A session's binding and where its route writes, checked against the runtime.

use super::{Binding, CaptureRoute, RouteTarget};
use crate::runtime::Snapshot;
use crate::storage::OperatorId;
use crate::{Error, Result};

pub(super) fn check_session(session_id: &str) -> Result<()> {
    crate::storage::check_session_id("session_id", session_id)
}

pub(super) fn check_binding(session: &str, bound: &Binding, asked: &Binding) -> Result<()> {
    let field = if bound.operator_id != asked.operator_id {
        "operator_id"
    } else if bound.agent_name != asked.agent_name {
        "agent_name"
    } else if bound.human_name != asked.human_name {
        "human_name"
    } else if bound.subject != asked.subject {
        "subject"
    } else {
        return Ok(());
    };
    Err(Error::invalid(
        field,
        format!(
            "differs from the one session `{session}` is bound to; a session cannot be re-bound (a turn may name another route: it is buffered per route)"
        ),
    ))
}

/// The writes a route makes, checked against `snapshot`.
pub(super) fn resolve(
    snapshot: &Snapshot,
    operator: &OperatorId,
    route: &CaptureRoute,
) -> Result<Vec<RouteTarget>> {
    match route {
        CaptureRoute::Direct(name) => {
            snapshot
                .destination("route.direct", name)?
                .graph_id(operator)?;
            Ok(vec![RouteTarget::Direct(name.clone())])
        }
        CaptureRoute::Lenses(names) => {
            if names.is_empty() {
                return Err(Error::invalid(
                    "route.lenses",
                    "must name at least one Lens",
                ));
            }
            let mut out: Vec<RouteTarget> = Vec::new();
            for (i, name) in names.iter().enumerate() {
                let field = format!("route.lenses[{i}]");
                let lens = snapshot.lens(&field, name)?;
                if lens.ingestion().is_none() {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "`{name}` is a replace-graph Lens, which cannot take a conversation"
                        ),
                    ));
                }
                snapshot
                    .destination(&format!("{field}.destination"), lens.destination())?
                    .graph_id(operator)?;
                let target = RouteTarget::Lens(name.clone());
                if !out.contains(&target) {
                    out.push(target);
                }
            }
            Ok(out)
        }
    }
}
