//! The authorization model: the object types, relations and permissions of the
//! schema ([`SCHEMA`]), subjects, relationships and filters, and the one evaluator of
//! the permissions every authorizer shares the semantics of.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The schema, in SpiceDB's schema language: what the SpiceDB authorizer writes, and
/// what the embedded and in-memory authorizers evaluate (`permits`).
///
/// * `person`: a human.
/// * `agent`: an AI agent, optionally owned by a person (`act_as = owner`).
/// * `group`: a Destination's graph; `access` (read) and `contribute` (write) are
///   granted to its members.
/// * `memory_fragment`: one stored episode, with the group it was written to, the
///   subject who wrote it and the subjects it concerns; `view` is granted to the
///   subjects it involves, to its writer and to whoever can access its group;
///   `delete` only to its writer.
pub const SCHEMA: &str = "\
definition person {}

definition agent {
    relation owner: person
    permission act_as = owner
}

definition group {
    relation member: person | agent
    permission access = member
    permission contribute = member
}

definition memory_fragment {
    relation source_group: group
    relation involves: person | agent
    relation shared_by: person | agent
    permission view = involves + shared_by + source_group->access
    permission delete = shared_by
}
";

/// The most bytes an object id may have.
pub const MAX_OBJECT_ID_BYTES: usize = 512;

/// An object type of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectType {
    /// A human.
    Person,
    /// An AI agent.
    Agent,
    /// A group: a Destination's graph.
    Group,
    /// A stored episode.
    MemoryFragment,
}

impl ObjectType {
    /// The schema's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::Person => "person",
            ObjectType::Agent => "agent",
            ObjectType::Group => "group",
            ObjectType::MemoryFragment => "memory_fragment",
        }
    }

    /// The type named `name` in the schema.
    pub fn parse(name: &str) -> Result<ObjectType> {
        Ok(match name {
            "person" => ObjectType::Person,
            "agent" => ObjectType::Agent,
            "group" => ObjectType::Group,
            "memory_fragment" => ObjectType::MemoryFragment,
            other => {
                return Err(Error::invalid(
                    "object.type",
                    format!("`{other}` is not a type of the schema"),
                ));
            }
        })
    }
}

impl fmt::Display for ObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A relation of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// `agent#owner: person`.
    Owner,
    /// `group#member: person | agent`.
    Member,
    /// `memory_fragment#source_group: group`.
    SourceGroup,
    /// `memory_fragment#involves: person | agent`.
    Involves,
    /// `memory_fragment#shared_by: person | agent`.
    SharedBy,
}

impl Relation {
    /// The schema's name of the relation.
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Owner => "owner",
            Relation::Member => "member",
            Relation::SourceGroup => "source_group",
            Relation::Involves => "involves",
            Relation::SharedBy => "shared_by",
        }
    }

    /// The relation named `name` in the schema.
    pub fn parse(name: &str) -> Result<Relation> {
        Ok(match name {
            "owner" => Relation::Owner,
            "member" => Relation::Member,
            "source_group" => Relation::SourceGroup,
            "involves" => Relation::Involves,
            "shared_by" => Relation::SharedBy,
            other => {
                return Err(Error::invalid(
                    "relation",
                    format!("`{other}` is not a relation of the schema"),
                ));
            }
        })
    }

    /// The type a resource of this relation has.
    pub fn resource_type(self) -> ObjectType {
        match self {
            Relation::Owner => ObjectType::Agent,
            Relation::Member => ObjectType::Group,
            Relation::SourceGroup | Relation::Involves | Relation::SharedBy => {
                ObjectType::MemoryFragment
            }
        }
    }

    /// Whether a subject of type `subject` may fill this relation.
    pub fn allows_subject(self, subject: ObjectType) -> bool {
        match self {
            Relation::Owner => subject == ObjectType::Person,
            Relation::SourceGroup => subject == ObjectType::Group,
            Relation::Member | Relation::Involves | Relation::SharedBy => {
                matches!(subject, ObjectType::Person | ObjectType::Agent)
            }
        }
    }

    /// Every relation.
    pub const ALL: [Relation; 5] = [
        Relation::Owner,
        Relation::Member,
        Relation::SourceGroup,
        Relation::Involves,
        Relation::SharedBy,
    ];
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permission of the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// `agent#act_as = owner`.
    ActAs,
    /// `group#access = member`: read the group's Destination.
    Access,
    /// `group#contribute = member`: write to the group's Destination.
    Contribute,
    /// `memory_fragment#view = involves + shared_by + source_group->access`.
    View,
    /// `memory_fragment#delete = shared_by`.
    Delete,
}

impl Permission {
    /// The schema's name of the permission.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::ActAs => "act_as",
            Permission::Access => "access",
            Permission::Contribute => "contribute",
            Permission::View => "view",
            Permission::Delete => "delete",
        }
    }

    /// The type the permission is defined on.
    pub fn resource_type(self) -> ObjectType {
        match self {
            Permission::ActAs => ObjectType::Agent,
            Permission::Access | Permission::Contribute => ObjectType::Group,
            Permission::View | Permission::Delete => ObjectType::MemoryFragment,
        }
    }

    /// An error unless the permission is defined on `resource`.
    pub fn check_on(self, resource: ObjectType) -> Result<()> {
        if self.resource_type() == resource {
            Ok(())
        } else {
            Err(Error::invalid(
                "permission",
                format!("`{self}` is not a permission of `{resource}`"),
            ))
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object: a type and an id (non-blank, no NUL, at most
/// `MAX_OBJECT_ID_BYTES` bytes; otherwise any text, byte for byte).
///
/// ```
/// use gralkor::access::{ObjectRef, ObjectType};
///
/// let g = ObjectRef::group("personal/ada")?;
/// assert_eq!(g.kind, ObjectType::Group);
/// assert_eq!(g.to_string(), "group:personal/ada");
/// assert!(ObjectRef::group(" ").is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawObject")]
pub struct ObjectRef {
    /// The type.
    #[serde(rename = "type")]
    pub kind: ObjectType,
    /// The id.
    pub id: String,
}

#[derive(Deserialize)]
struct RawObject {
    #[serde(rename = "type")]
    kind: ObjectType,
    id: String,
}

impl TryFrom<RawObject> for ObjectRef {
    type Error = Error;
    fn try_from(raw: RawObject) -> Result<ObjectRef> {
        ObjectRef::new(raw.kind, raw.id)
    }
}

fn check_id(field: &str, id: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    if id.contains('\0') {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    if id.len() > MAX_OBJECT_ID_BYTES {
        return Err(Error::invalid(
            field,
            format!(
                "must be at most {MAX_OBJECT_ID_BYTES} bytes (got {})",
                id.len()
            ),
        ));
    }
    Ok(())
}

impl ObjectRef {
    /// An object, its id checked.
    pub fn new(kind: ObjectType, id: impl Into<String>) -> Result<ObjectRef> {
        let id = id.into();
        check_id("object.id", &id)?;
        Ok(ObjectRef { kind, id })
    }

    /// A group (a Destination's logical graph id).
    pub fn group(id: impl Into<String>) -> Result<ObjectRef> {
        ObjectRef::new(ObjectType::Group, id)
    }

    /// A memory fragment (an episode's uuid).
    pub fn fragment(episode: uuid::Uuid) -> ObjectRef {
        ObjectRef {
            kind: ObjectType::MemoryFragment,
            id: episode.to_string(),
        }
    }

    /// `type:id`, the key the embedded authorizer stores.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.id)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.id)
    }
}

/// Who asks: a person or an agent. On the wire `{"type": "person", "id": "ada"}`.
///
/// ```
/// use gralkor::access::Subject;
///
/// let ada = Subject::person("ada")?;
/// let bot = Subject::agent("support-bot")?;
/// assert_eq!(bot.to_string(), "agent:support-bot");
/// let json = serde_json::to_string(&ada).unwrap();
/// assert_eq!(json, r#"{"type":"person","id":"ada"}"#);
/// assert_eq!(serde_json::from_str::<Subject>(&json).unwrap(), ada);
/// assert!(serde_json::from_str::<Subject>(r#"{"type":"group","id":"x"}"#).is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawObject", into = "ObjectRef")]
pub struct Subject(ObjectRef);

impl TryFrom<RawObject> for Subject {
    type Error = Error;
    fn try_from(raw: RawObject) -> Result<Subject> {
        Subject::from_object(ObjectRef::new(raw.kind, raw.id)?)
    }
}

impl From<Subject> for ObjectRef {
    fn from(s: Subject) -> ObjectRef {
        s.0
    }
}

impl Subject {
    /// A person.
    pub fn person(id: impl Into<String>) -> Result<Subject> {
        Ok(Subject(ObjectRef::new(ObjectType::Person, id)?))
    }

    /// An agent.
    pub fn agent(id: impl Into<String>) -> Result<Subject> {
        Ok(Subject(ObjectRef::new(ObjectType::Agent, id)?))
    }

    /// A subject from an object of type person or agent.
    pub fn from_object(object: ObjectRef) -> Result<Subject> {
        match object.kind {
            ObjectType::Person | ObjectType::Agent => Ok(Subject(object)),
            other => Err(Error::invalid(
                "subject.type",
                format!("must be `person` or `agent` (got `{other}`)"),
            )),
        }
    }

    /// The subject as an object.
    pub fn object(&self) -> &ObjectRef {
        &self.0
    }

    /// The subject's type.
    pub fn kind(&self) -> ObjectType {
        self.0.kind
    }

    /// The subject's id.
    pub fn id(&self) -> &str {
        &self.0.id
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One relationship (a tuple): `resource#relation@subject`, checked against the
/// schema when made.
///
/// ```
/// use gralkor::access::{ObjectRef, Relation, Relationship, Subject};
///
/// let r = Relationship::member("team", &Subject::person("ada")?)?;
/// assert_eq!(r.to_string(), "group:team#member@person:ada");
/// // A group cannot own an agent.
/// assert!(Relationship::new(ObjectRef::group("team")?, Relation::Owner,
///     Subject::person("ada")?.object().clone()).is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Relationship {
    /// The resource.
    pub resource: ObjectRef,
    /// The relation.
    pub relation: Relation,
    /// The subject.
    pub subject: ObjectRef,
}

impl Relationship {
    /// A relationship, checked against the schema.
    pub fn new(resource: ObjectRef, relation: Relation, subject: ObjectRef) -> Result<Self> {
        if relation.resource_type() != resource.kind {
            return Err(Error::invalid(
                "relationship.relation",
                format!("`{relation}` is not a relation of `{}`", resource.kind),
            ));
        }
        if !relation.allows_subject(subject.kind) {
            return Err(Error::invalid(
                "relationship.subject",
                format!(
                    "`{}` cannot fill `{}#{relation}`",
                    subject.kind, resource.kind
                ),
            ));
        }
        Ok(Relationship {
            resource,
            relation,
            subject,
        })
    }

    /// `group:<group>#member@<subject>`.
    pub fn member(group: impl Into<String>, subject: &Subject) -> Result<Self> {
        Relationship::new(
            ObjectRef::group(group)?,
            Relation::Member,
            subject.object().clone(),
        )
    }

    /// `agent:<agent>#owner@person:<owner>`.
    pub fn owner(agent: &str, owner: &str) -> Result<Self> {
        Relationship::new(
            ObjectRef::new(ObjectType::Agent, agent)?,
            Relation::Owner,
            ObjectRef::new(ObjectType::Person, owner)?,
        )
    }
}

impl fmt::Display for Relationship {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}@{}", self.resource, self.relation, self.subject)
    }
}

/// The tuples of one episode: its group, its writer and the subjects it concerns.
///
/// ```
/// use gralkor::access::{Fragment, Subject};
///
/// let f = Fragment::new(uuid::Uuid::nil(), "team", Subject::agent("bot")?)
///     .involves([Subject::person("ada")?]);
/// assert_eq!(f.relationships()?.len(), 3);
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// The episode's uuid.
    pub episode: uuid::Uuid,
    /// The group (the logical graph id of the Destination it was written to).
    pub group: String,
    /// The writer.
    pub shared_by: Subject,
    /// The subjects it concerns.
    pub involves: Vec<Subject>,
}

impl Fragment {
    /// A fragment without `involves`.
    pub fn new(episode: uuid::Uuid, group: impl Into<String>, shared_by: Subject) -> Fragment {
        Fragment {
            episode,
            group: group.into(),
            shared_by,
            involves: Vec::new(),
        }
    }

    /// The subjects it concerns.
    pub fn involves(mut self, subjects: impl IntoIterator<Item = Subject>) -> Fragment {
        self.involves.extend(subjects);
        self
    }

    /// Its relationships.
    pub fn relationships(&self) -> Result<Vec<Relationship>> {
        let me = ObjectRef::fragment(self.episode);
        let mut out = vec![
            Relationship::new(
                me.clone(),
                Relation::SourceGroup,
                ObjectRef::group(self.group.clone())?,
            )?,
            Relationship::new(
                me.clone(),
                Relation::SharedBy,
                self.shared_by.object().clone(),
            )?,
        ];
        for s in &self.involves {
            out.push(Relationship::new(
                me.clone(),
                Relation::Involves,
                s.object().clone(),
            )?);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// Which relationships a delete or a read matches: a resource type, and optionally a
/// resource id, a relation and a subject (all given must match).
///
/// ```
/// use gralkor::access::{ObjectType, RelationshipFilter, Subject};
///
/// let all_of_a_fragment = RelationshipFilter::resource(
///     gralkor::access::ObjectRef::fragment(uuid::Uuid::nil()));
/// let ada_everywhere = RelationshipFilter::of_type(ObjectType::Group)
///     .subject(Subject::person("ada")?.object().clone());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationshipFilter {
    /// The resource type.
    pub resource_type: ObjectType,
    /// The resource id.
    pub resource_id: Option<String>,
    /// The relation.
    pub relation: Option<Relation>,
    /// The subject.
    pub subject: Option<ObjectRef>,
}

impl RelationshipFilter {
    /// Every relationship of resources of `resource_type`.
    pub fn of_type(resource_type: ObjectType) -> RelationshipFilter {
        RelationshipFilter {
            resource_type,
            resource_id: None,
            relation: None,
            subject: None,
        }
    }

    /// Every relationship of one resource.
    pub fn resource(resource: ObjectRef) -> RelationshipFilter {
        RelationshipFilter {
            resource_type: resource.kind,
            resource_id: Some(resource.id),
            relation: None,
            subject: None,
        }
    }

    /// Only this relation.
    pub fn relation(mut self, relation: Relation) -> RelationshipFilter {
        self.relation = Some(relation);
        self
    }

    /// Only this subject.
    pub fn subject(mut self, subject: ObjectRef) -> RelationshipFilter {
        self.subject = Some(subject);
        self
    }

    /// Whether `r` matches.
    pub fn matches(&self, r: &Relationship) -> bool {
        r.resource.kind == self.resource_type
            && self
                .resource_id
                .as_ref()
                .is_none_or(|id| *id == r.resource.id)
            && self.relation.is_none_or(|rel| rel == r.relation)
            && self.subject.as_ref().is_none_or(|s| *s == r.subject)
    }
}

/// The schema's semantics, once: whether `subject` has `permission` on `resource`,
/// given the resource's own relationships (`direct`: relation and subject) and the
/// groups the subject is a member of (`member_of`, logical ids; only `view` reads it).
///
/// ```
/// use std::collections::BTreeSet;
/// use gralkor::access::{permits, ObjectRef, Permission, Relation, Subject};
///
/// let ada = Subject::person("ada")?;
/// let team = ObjectRef::group("team")?;
/// let direct = [(Relation::SourceGroup, team.clone())];
/// let fragment = ObjectRef::fragment(uuid::Uuid::nil());
/// assert!(!permits(&fragment, Permission::View, &ada, &direct, &BTreeSet::new()));
/// assert!(permits(&fragment, Permission::View, &ada, &direct, &BTreeSet::from(["team".to_string()])));
/// assert!(!permits(&fragment, Permission::Delete, &ada, &direct, &BTreeSet::from(["team".to_string()])));
/// # Ok::<(), gralkor::Error>(())
/// ```
pub fn permits(
    resource: &ObjectRef,
    permission: Permission,
    subject: &Subject,
    direct: &[(Relation, ObjectRef)],
    member_of: &BTreeSet<String>,
) -> bool {
    if permission.resource_type() != resource.kind {
        return false;
    }
    let has = |rel: Relation| {
        direct
            .iter()
            .any(|(r, s)| *r == rel && s == subject.object())
    };
    match permission {
        Permission::ActAs => has(Relation::Owner),
        Permission::Access | Permission::Contribute => has(Relation::Member),
        Permission::View => {
            has(Relation::Involves)
                || has(Relation::SharedBy)
                || direct.iter().any(|(r, g)| {
                    *r == Relation::SourceGroup
                        && g.kind == ObjectType::Group
                        && member_of.contains(&g.id)
                })
        }
        Permission::Delete => has(Relation::SharedBy),
    }
}
