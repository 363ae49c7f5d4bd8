//! With an authorizer (`--authorizer embedded`): who asks (`--as`), the groups they may
//! read with their members (`groups`), membership writes (`add-member`), and the checks
//! for the reads the CLI makes on the graph itself (facts by id, counts, export).
//!
//! Groups are Destination graphs, named by their logical graph id (`global`,
//! `personal/ada`, `team-x`). The rule of `add-member` (also in `--help` and the
//! README): the subject must already be a member of the group; or the group has no
//! members yet, and the subject founds it (they are written as its first member, with
//! the new one, in one write); or the group is the subject's own personal graph
//! `personal/<their id>` (a person). Nobody but its owner adds members to a personal
//! graph, even one without members yet.

use std::collections::BTreeMap;
use std::sync::Arc;

use gralkor::NativeClient;
use gralkor::access::{
    Authorizer, ObjectRef, ObjectType, Permission, Relation, Relationship, RelationshipFilter,
    Subject,
};
use gralkor::client::GraphId;
use gralkor::graph::EntityEdge;
use serde::Serialize;

use crate::args::AddMemberArgs;
use crate::commands::Out;
use crate::failure::{Failure, Outcome};

/// `person:ID` or `agent:ID`.
pub fn parse_subject(text: &str) -> Result<Subject, String> {
    let (kind, id) = text
        .trim()
        .split_once(':')
        .ok_or_else(|| format!("must be person:ID or agent:ID (got `{text}`)"))?;
    let subject = match kind {
        "person" => Subject::person(id),
        "agent" => Subject::agent(id),
        other => {
            return Err(format!(
                "must be person:ID or agent:ID (`{other}` is not a subject type)"
            ));
        }
    };
    subject.map_err(|e| e.to_string())
}

/// The client's authorizer, or the usage error saying one must be configured.
fn authorizer<'a>(client: &'a NativeClient, command: &str) -> Outcome<&'a Arc<dyn Authorizer>> {
    client.authorizer().ok_or_else(|| needs_authorizer(command))
}

/// `command` without an authorizer: a usage error.
pub fn needs_authorizer(command: &str) -> Failure {
    Failure::Usage(format!(
        "`{command}` needs an authorizer: set --authorizer embedded (or \
         GRALKOR_AUTHORIZER=embedded) and who asks with --as person:ID|agent:ID (or \
         GRALKOR_SUBJECT)"
    ))
}

/// The person's own personal group, `personal/<id>` (an agent has none).
fn own_personal(subject: &Subject) -> Option<String> {
    (subject.kind() == ObjectType::Person).then(|| format!("personal/{}", subject.id()))
}

/// Whether `subject` may read `graph` as a whole (its group's `access`, or their own
/// personal graph). Without an authorizer: always.
pub async fn may_read(
    client: &NativeClient,
    subject: Option<&Subject>,
    graph: &GraphId,
) -> Outcome<bool> {
    let (Some(authz), Some(subject)) = (client.authorizer(), subject) else {
        return Ok(client.authorizer().is_none());
    };
    if own_personal(subject).as_deref() == Some(graph.as_str()) {
        return Ok(true);
    }
    Ok(authz
        .check(
            subject,
            Permission::Access,
            &ObjectRef::group(graph.as_str())?,
        )
        .await?)
}

/// `graph` read whole (an export), or [`gralkor::Error::PermissionDenied`].
pub async fn must_read(
    client: &NativeClient,
    subject: Option<&Subject>,
    graph: &GraphId,
) -> Outcome<()> {
    if may_read(client, subject, graph).await? {
        return Ok(());
    }
    Err(gralkor::Error::PermissionDenied {
        subject: subject.map(Subject::to_string).unwrap_or_default(),
        permission: Permission::Access.as_str().into(),
        resource: ObjectRef::group(graph.as_str())?.to_string(),
    }
    .into())
}

/// Whether `subject` may see a fact read from `graph`: they may read the graph, or
/// view one of the episodes it came from.
pub async fn fact_visible(
    client: &NativeClient,
    subject: Option<&Subject>,
    graph: &GraphId,
    fact: &EntityEdge,
) -> Outcome<bool> {
    if may_read(client, subject, graph).await? {
        return Ok(true);
    }
    let (Some(authz), Some(subject)) = (client.authorizer(), subject) else {
        return Ok(false);
    };
    let fragments: Vec<ObjectRef> = fact
        .episodes
        .iter()
        .map(|e| ObjectRef::fragment(*e))
        .collect();
    if fragments.is_empty() {
        return Ok(false);
    }
    Ok(authz
        .check_many(subject, Permission::View, &fragments)
        .await?
        .into_iter()
        .any(|v| v))
}

#[derive(Serialize)]
struct Group {
    group: String,
    members: Vec<String>,
}

/// `gralkor groups`: the groups the subject may access, with their members.
pub async fn groups(client: &NativeClient, subject: &Subject, out: Out) -> Outcome {
    let authz = authorizer(client, "groups")?;
    let readable = authz.lookup_resources(subject, Permission::Access).await?;
    let mut members: BTreeMap<String, Vec<String>> =
        readable.into_iter().map(|g| (g, Vec::new())).collect();
    let memberships = authz
        .read_relationships(
            &RelationshipFilter::of_type(ObjectType::Group).relation(Relation::Member),
        )
        .await?;
    for r in memberships {
        if let Some(list) = members.get_mut(&r.resource.id) {
            list.push(r.subject.to_string());
        }
    }
    let groups: Vec<Group> = members
        .into_iter()
        .map(|(group, members)| Group { group, members })
        .collect();
    out.emit(&groups, || {
        if groups.is_empty() {
            return format!("{subject} may read no group");
        }
        groups
            .iter()
            .map(|g| format!("{}\t{}", g.group, g.members.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

#[derive(Serialize)]
struct Added {
    group: String,
    member: String,
    /// The subject founded the group (it had no members): they were written first.
    founded: bool,
    /// `false` when the member was one already.
    written: bool,
}

/// `gralkor add-member`: writes `group:<group>#member@<member>` under the rule of the
/// [module docs](self).
pub async fn add_member(
    client: &NativeClient,
    subject: &Subject,
    args: &AddMemberArgs,
    out: Out,
) -> Outcome {
    let authz = authorizer(client, "add-member")?;
    if args.group.starts_with("gralkor/") {
        return Err(gralkor::Error::InvalidInput {
            field: "group".into(),
            rule: format!(
                "`{}` is one of gralkor's own graphs (`gralkor/` is reserved), not a group",
                args.group
            ),
        }
        .into());
    }
    let group = ObjectRef::group(args.group.clone())?;
    let member = parse_subject(&args.member).map_err(|rule| gralkor::Error::InvalidInput {
        field: "member".into(),
        rule,
    })?;
    let current = authz
        .read_relationships(&RelationshipFilter::resource(group.clone()).relation(Relation::Member))
        .await?;
    let is_member = |s: &Subject| current.iter().any(|r| r.subject == *s.object());
    let own = own_personal(subject).as_deref() == Some(args.group.as_str());
    let personal = args.group.starts_with("personal/");
    let allowed = if personal {
        own
    } else {
        is_member(subject) || current.is_empty()
    };
    if !allowed {
        return Err(Failure::Refused(format!(
            "{subject} may not add members to group `{}`: {}",
            args.group,
            if personal {
                "a personal graph's members are added by its owner only"
            } else {
                "only a member may add members (it has some already, and you are not one)"
            }
        )));
    }
    let founded = !is_member(subject);
    let written = !is_member(&member);
    let mut writes = Vec::new();
    if founded {
        writes.push(Relationship::member(args.group.clone(), subject)?);
    }
    if written && member != *subject {
        writes.push(Relationship::member(args.group.clone(), &member)?);
    }
    if !writes.is_empty() {
        authz.write_relationships(&writes).await?;
    }
    let added = Added {
        group: args.group.clone(),
        member: member.to_string(),
        founded,
        written,
    };
    out.emit(&added, || {
        let mut line = if added.written {
            format!("added {} to {}", added.member, added.group)
        } else {
            format!("{} is a member of {} already", added.member, added.group)
        };
        if added.founded {
            line.push_str(&format!(" (founded by {subject}, its first member)"));
        }
        line
    })
}
