//! [`DefaultGroup`]: the group a deployment names for memory that names none, and the
//! people and agents who are its members from startup (the OpenClaw plugin's
//! `graphiti.defaultGroupId` and its startup membership of the configured subject).

use std::fmt;

use super::{Destination, GLOBAL};
use crate::access::{Authorizer, ObjectRef, Relation, Relationship, RelationshipFilter, Subject};
use crate::{Error, Result};

/// The variable naming the default group ([`DefaultGroup::from_lookup`]).
pub(crate) const DEFAULT_GROUP_VAR: &str = "GRALKOR_DEFAULT_GROUP";
/// The variable listing the default group's startup members: `person:ID,agent:ID,…`.
pub(crate) const DEFAULT_GROUP_MEMBERS_VAR: &str = "GRALKOR_DEFAULT_GROUP_MEMBERS";

/// A default group: a shared Destination (its name is its group and logical graph
/// id) and the subjects who are its members from startup.
///
/// A request that names no Destination where the OpenClaw plugin uses its
/// `defaultGroupId` writes here: `memory_store` without `group_id`
/// ([`ToolContext::default_group`](crate::agent::tools::ToolContext::default_group)).
/// At startup, [`ensure_members`](DefaultGroup::ensure_members) writes the
/// memberships to the authorizer, idempotently, so the configured people and agents
/// read and write the group with no `add-member`. The configuration is trusted: these
/// memberships are written without `add-member`'s rule (only a member adds members).
///
/// The name is a Destination name that every operator shares: `global` or an
/// application name — not `personal` (one graph per operator, no group) and not a
/// session group (`session-<id>`, one per conversation).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::access::{Authorizer, InMemoryAuthorizer, ObjectRef, Permission, Subject};
/// use gralkor::destination::DefaultGroup;
///
/// let main = DefaultGroup::new("main")?.members(DefaultGroup::parse_members(
///     "GRALKOR_DEFAULT_GROUP_MEMBERS",
///     "agent:my-agent, person:ada",
/// )?);
/// let authz = InMemoryAuthorizer::new();
/// assert_eq!(main.ensure_members(&authz).await?, 2); // written
/// assert_eq!(main.ensure_members(&authz).await?, 0); // there already
/// let bot = Subject::agent("my-agent")?;
/// assert!(authz.check(&bot, Permission::Contribute, &ObjectRef::group("main")?).await?);
///
/// assert!(DefaultGroup::new("personal").is_err());
/// assert!(DefaultGroup::new("session-7").is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultGroup {
    destination: Destination,
    members: Vec<Subject>,
}

impl DefaultGroup {
    /// The default group the settings name, read through `lookup` (a variable name →
    /// its value; blank values count as unset): `GRALKOR_DEFAULT_GROUP` and
    /// `GRALKOR_DEFAULT_GROUP_MEMBERS`. `None` when no group is named; members without
    /// a group, an entry that is not `person:ID` or `agent:ID`, or a name that cannot
    /// be a default group are configuration errors naming the variable (and the
    /// entry's index).
    ///
    /// ```
    /// use gralkor::destination::DefaultGroup;
    ///
    /// let env = |k: &str| match k {
    ///     "GRALKOR_DEFAULT_GROUP" => Some("main".to_string()),
    ///     "GRALKOR_DEFAULT_GROUP_MEMBERS" => Some("agent:my-agent, person:ada".to_string()),
    ///     _ => None,
    /// };
    /// let group = DefaultGroup::from_lookup(env)?.expect("a group is named");
    /// assert_eq!(group.to_string(), "main (members agent:my-agent, person:ada)");
    /// assert!(DefaultGroup::from_lookup(|_| None)?.is_none());
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<DefaultGroup>> {
        let set = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let members = match set(DEFAULT_GROUP_MEMBERS_VAR) {
            Some(text) => {
                DefaultGroup::parse_members(DEFAULT_GROUP_MEMBERS_VAR, &text).map_err(as_config)?
            }
            None => Vec::new(),
        };
        match set(DEFAULT_GROUP_VAR) {
            Some(name) => Ok(Some(
                DefaultGroup::named(DEFAULT_GROUP_VAR, name.trim())
                    .map_err(as_config)?
                    .members(members),
            )),
            None if !members.is_empty() => Err(Error::config(
                DEFAULT_GROUP_MEMBERS_VAR,
                format!("names members of no group: set {DEFAULT_GROUP_VAR} too"),
            )),
            None => Ok(None),
        }
    }

    /// [`from_lookup`](DefaultGroup::from_lookup) over the process environment.
    pub fn from_env() -> Result<Option<DefaultGroup>> {
        DefaultGroup::from_lookup(|k| std::env::var(k).ok())
    }

    /// The default group `name`, without members yet. The name is checked as a
    /// Destination name; `personal` and session groups are refused, naming
    /// `default_group`.
    pub fn new(name: impl Into<String>) -> Result<DefaultGroup> {
        DefaultGroup::named("default_group", name.into())
    }

    /// [`new`](DefaultGroup::new) with the errors naming `field` (the setting the
    /// name came from, e.g. `GRALKOR_DEFAULT_GROUP`).
    pub fn named(field: &str, name: impl Into<String>) -> Result<DefaultGroup> {
        let name = name.into();
        let destination = if name == GLOBAL {
            Destination::global()
        } else {
            Destination::new(name.clone()).map_err(|e| rename(e, field))?
        };
        if destination.is_personal() {
            return Err(Error::invalid(
                field,
                "must be a group every operator shares: `personal` is one graph per \
                 operator and has no members",
            ));
        }
        if destination.is_session_group() {
            return Err(Error::invalid(
                field,
                format!(
                    "`{name}` is a session group name (`session-<session id>`): session \
                     groups exist per conversation and belong to their first writer"
                ),
            ));
        }
        Ok(DefaultGroup {
            destination,
            members: Vec::new(),
        })
    }

    /// Adds a member (a repeated one is kept once).
    pub fn member(mut self, subject: Subject) -> Self {
        if !self.members.contains(&subject) {
            self.members.push(subject);
        }
        self
    }

    /// Adds members.
    pub fn members(self, subjects: impl IntoIterator<Item = Subject>) -> Self {
        subjects.into_iter().fold(self, DefaultGroup::member)
    }

    /// The group's name: its Destination's name, its group id and logical graph id.
    pub fn name(&self) -> &str {
        self.destination.name()
    }

    /// The group's Destination.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// The members written at startup.
    pub fn subjects(&self) -> &[Subject] {
        &self.members
    }

    /// Subjects from a list `person:ID, agent:ID, …` (commas, surrounding whitespace
    /// ignored; an empty list is none). An entry that is not `person:ID` or
    /// `agent:ID` is an error naming `field` and the entry.
    pub fn parse_members(field: &str, text: &str) -> Result<Vec<Subject>> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .enumerate()
            .map(|(i, entry)| {
                let at = format!("{field}[{i}]");
                let (kind, id) = entry.split_once(':').ok_or_else(|| {
                    Error::invalid(
                        &at,
                        format!("must be person:ID or agent:ID (got `{entry}`)"),
                    )
                })?;
                match kind {
                    "person" => Subject::person(id),
                    "agent" => Subject::agent(id),
                    other => Err(Error::invalid(
                        &at,
                        format!("must be person:ID or agent:ID (`{other}` is not a subject type)"),
                    )),
                }
                .map_err(|e| rename(e, &at))
            })
            .collect()
    }

    /// Writes the membership of every configured member who is not one yet, and
    /// returns how many were written (0 when all were there: the call is idempotent
    /// and cheap to make at every startup — one read, and a write only when one is
    /// missing). Nothing else is touched: members added otherwise stay.
    pub async fn ensure_members(&self, authorizer: &dyn Authorizer) -> Result<usize> {
        if self.members.is_empty() {
            return Ok(0);
        }
        let group = ObjectRef::group(self.name())?;
        let present = authorizer
            .read_relationships(&RelationshipFilter::resource(group).relation(Relation::Member))
            .await?;
        let missing: Vec<Relationship> = self
            .members
            .iter()
            .filter(|s| !present.iter().any(|r| r.subject == *s.object()))
            .map(|s| Relationship::member(self.name(), s))
            .collect::<Result<_>>()?;
        if !missing.is_empty() {
            authorizer.write_relationships(&missing).await?;
            tracing::info!(
                group = self.name(),
                written = missing.len(),
                members = self.members.len(),
                "default group memberships written"
            );
        }
        Ok(missing.len())
    }
}

impl fmt::Display for DefaultGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        if !self.members.is_empty() {
            let members: Vec<String> = self.members.iter().map(Subject::to_string).collect();
            write!(f, " (members {})", members.join(", "))?;
        }
        Ok(())
    }
}

/// An invalid input as a configuration error (a setting, not a request, was wrong).
fn as_config(e: Error) -> Error {
    match e {
        Error::InvalidInput { field, rule } => Error::config(field, rule),
        other => other,
    }
}

/// `e` with its field renamed to `field` (an invalid input or configuration error).
fn rename(e: Error, field: &str) -> Error {
    match e {
        Error::InvalidInput { rule, .. } | Error::Config { rule, .. } => {
            Error::invalid(field, rule)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Option<DefaultGroup>> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DefaultGroup::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn the_default_group_and_its_members_are_read_and_checked_naming_the_variable() {
        let group = from(&[
            ("GRALKOR_DEFAULT_GROUP", "main"),
            (
                "GRALKOR_DEFAULT_GROUP_MEMBERS",
                "agent:my-agent, person:ada,agent:my-agent",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(group.name(), "main");
        let members: Vec<String> = group.subjects().iter().map(ToString::to_string).collect();
        assert_eq!(members, ["agent:my-agent", "person:ada"]);
        assert_eq!(
            group.to_string(),
            "main (members agent:my-agent, person:ada)"
        );
        assert!(from(&[]).unwrap().is_none());
        assert!(from(&[("GRALKOR_DEFAULT_GROUP", " ")]).unwrap().is_none());

        let err = |pairs: &[(&str, &str)]| match from(pairs).unwrap_err() {
            Error::Config { field, rule } => (field, rule),
            other => panic!("not a configuration error: {other:?}"),
        };
        let (field, rule) = err(&[("GRALKOR_DEFAULT_GROUP_MEMBERS", "agent:a")]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP_MEMBERS");
        assert!(rule.contains("GRALKOR_DEFAULT_GROUP "), "{rule}");
        let (field, rule) = err(&[
            ("GRALKOR_DEFAULT_GROUP", "main"),
            ("GRALKOR_DEFAULT_GROUP_MEMBERS", "agent:a, team:x"),
        ]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP_MEMBERS[1]");
        assert!(rule.contains("`team` is not a subject type"), "{rule}");
        let (field, rule) = err(&[
            ("GRALKOR_DEFAULT_GROUP", "main"),
            ("GRALKOR_DEFAULT_GROUP_MEMBERS", "ada"),
        ]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP_MEMBERS[0]");
        assert!(rule.contains("person:ID or agent:ID"), "{rule}");
        let (field, _) = err(&[("GRALKOR_DEFAULT_GROUP", "personal")]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP");
        let (field, rule) = err(&[("GRALKOR_DEFAULT_GROUP", "session-7")]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP");
        assert!(rule.contains("session group"), "{rule}");
        let (field, _) = err(&[("GRALKOR_DEFAULT_GROUP", "personal/ada")]);
        assert_eq!(field, "GRALKOR_DEFAULT_GROUP");
        // `global` is a shared group too.
        let g = from(&[("GRALKOR_DEFAULT_GROUP", "global")])
            .unwrap()
            .unwrap();
        assert_eq!(g.name(), "global");
        assert!(g.destination().is_packaged());
    }
}
