//! Ontologies: the entity and relationship types an extraction may use.
//!
//! An [`Ontology`] is declared with a builder and checked when it is built, never at
//! the first write: every mistake is an [`Error::InvalidInput`] whose field names the
//! offending declaration (`ontology.entities[Person].fields[name]`) and whose rule says
//! what it broke. Both modes are required arguments of [`Ontology::builder`]; there is
//! no default.
//!
//! * [`EntityMode::Strict`] keeps only entities of a declared type; [`EntityMode::Open`]
//!   also keeps generic `Entity` nodes.
//! * [`RelationshipMode::Scoped`] allows a declared relationship type only between the
//!   endpoints it was declared for; [`RelationshipMode::Open`] allows it between any
//!   entities. Either way, facts whose relation is not a declared type stay allowed as
//!   generic facts.
//!
//! ```
//! use gralkor::ontology::{EntityMode, EntityType, Field, Ontology, Relationship, RelationshipMode};
//!
//! let ontology = Ontology::builder(EntityMode::Strict, RelationshipMode::Scoped)
//!     .entity(
//!         EntityType::new("Teammate")
//!             .description("A person the agent works with.")
//!             .field(Field::string("handle").required().doc("stable login handle"))
//!             .field(Field::string("timezone").doc("IANA tz")),
//!     )
//!     .entity(EntityType::new("WorkingPreference").field(Field::string("statement").required()))
//!     .relationship(
//!         Relationship::new("Teammate", "prefers", "WorkingPreference")
//!             .field(Field::string("since").doc("date first observed")),
//!     )
//!     .build()?;
//!
//! assert_eq!(ontology.label_for_id(1), Some("Teammate"));
//! assert!(ontology.relationship_allowed("Teammate", "PREFERS", "WorkingPreference"));
//! assert!(!ontology.relationship_allowed("WorkingPreference", "prefers", "Teammate"));
//!
//! // Mistakes are caught when the ontology is built.
//! let err = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
//!     .entity(EntityType::new("Person").field(Field::string("name")))
//!     .build()
//!     .unwrap_err();
//! assert!(err.to_string().starts_with("invalid input: `ontology.entities[Person].fields[name]` is reserved"));
//! # Ok::<(), gralkor::Error>(())
//! ```
//!
//! # Naming conventions
//!
//! Labels and relationship types reach Cypher as labels and types, so they are checked
//! with `is_identifier` and a little more:
//!
//! * an entity label starts with an upper-case ASCII letter (`Teammate`, `WorkingPreference`);
//!   `Entity`, `Episodic` and `Community` are gralkor's own labels and are reserved;
//! * a verb is `snake_case` or `UPPER_SNAKE_CASE` (no mixed case) and becomes the
//!   relationship type in upper case (`works_at` → `WORKS_AT`); `RELATES_TO` (the generic
//!   fact, and what a fact demoted by [`RelationshipMode::Scoped`] becomes), `MENTIONS`
//!   and `HAS_MEMBER` are reserved;
//! * field names are identifiers. Entity fields may not reuse an entity node's own
//!   properties (`RESERVED_ENTITY_FIELDS`), relationship fields may not reuse a fact's
//!   (`RESERVED_RELATIONSHIP_FIELDS`);
//! * labels, verbs and field names are compared ignoring ASCII case, both for reserved
//!   names and for duplicates: `Person` and `person` would be one type to a model.
//!
//! A verb repeated for several endpoint pairs is one relationship type with several
//! endpoints; every declaration of it must carry the same fields.

mod schema;

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

internal_use!(schema::PromptEntityType);

use crate::error::{Error, Result};
internal_item! {
/// Whether `name` may be a label, relationship type or property key: a plain Cypher
/// identifier, `[A-Za-z_][A-Za-z0-9_]*` (the rule of the storage adapter, which
/// refuses anything else before it reaches Cypher). The domain — ontologies, Lenses,
/// Reflections, search filters — checks names with this.
///
/// ```
/// use gralkor::ontology::is_identifier;
///
/// assert!(is_identifier("Person") && is_identifier("_x1"));
/// assert!(!is_identifier("1x") && !is_identifier("has space") && !is_identifier(""));
/// ```
pub fn is_identifier(name: &str) -> bool {
    crate::vocab::is_identifier(name)
}
}

internal_item! {
/// Labels gralkor itself puts on nodes; no entity type may use them (ignoring case).
pub const RESERVED_LABELS: [&str; 3] = ["Entity", "Episodic", "Community"];
}

internal_item! {
/// Properties of an entity node; no entity field may use them (ignoring case).
pub const RESERVED_ENTITY_FIELDS: [&str; 8] = [
    "uuid",
    "name",
    "group_id",
    "labels",
    "created_at",
    "summary",
    "attributes",
    "name_embedding",
];
}

internal_item! {
/// Properties of a fact; no relationship field may use them (ignoring case).
pub const RESERVED_RELATIONSHIP_FIELDS: [&str; 13] = [
    "uuid",
    "name",
    "group_id",
    "fact",
    "fact_embedding",
    "episodes",
    "source_node_uuid",
    "target_node_uuid",
    "created_at",
    "valid_at",
    "invalid_at",
    "expired_at",
    "attributes",
];
}

internal_item! {
/// Relationship types gralkor itself uses; no verb may become one.
pub const RESERVED_RELATIONSHIP_TYPES: [&str; 3] = ["RELATES_TO", "MENTIONS", "HAS_MEMBER"];
}

/// The label every entity carries, and the type with id 0 in the prompt's type list.
pub const GENERIC_ENTITY_LABEL: &str = "Entity";

/// Which entities an extraction keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityMode {
    /// Only entities of a declared type are kept; generic ones are dropped.
    Strict,
    /// Generic `Entity` nodes are kept alongside the declared types.
    Open,
}

/// Where declared relationship types may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelationshipMode {
    /// A declared type only between the endpoints it was declared for.
    Scoped,
    /// A declared type between any two entities.
    Open,
}

/// The type of an attribute field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A JSON string.
    String,
    /// A whole JSON number.
    Integer,
    /// Any JSON number.
    Float,
    /// `true` or `false`.
    Boolean,
}

impl FieldType {
    /// The name used in prompts and errors: `string`, `integer`, `float`, `boolean`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Integer => "integer",
            FieldType::Float => "float",
            FieldType::Boolean => "boolean",
        }
    }
}

/// A typed attribute field of an entity type or a relationship.
///
/// ```
/// use gralkor::ontology::{Field, FieldType};
///
/// let f = Field::string("handle").required().doc("stable login handle");
/// assert_eq!((f.name(), f.field_type(), f.is_required()), ("handle", FieldType::String, true));
/// assert_eq!(f.doc_text(), Some("stable login handle"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    name: String,
    #[serde(rename = "type")]
    ty: FieldType,
    #[serde(default)]
    required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    doc: Option<String>,
}

impl Field {
    /// An optional field of type `ty`.
    pub fn new(name: impl Into<String>, ty: FieldType) -> Self {
        Field {
            name: name.into(),
            ty,
            required: false,
            doc: None,
        }
    }

    /// An optional string field.
    pub fn string(name: impl Into<String>) -> Self {
        Field::new(name, FieldType::String)
    }

    /// An optional integer field.
    pub fn integer(name: impl Into<String>) -> Self {
        Field::new(name, FieldType::Integer)
    }

    /// An optional float field.
    pub fn float(name: impl Into<String>) -> Self {
        Field::new(name, FieldType::Float)
    }

    /// An optional boolean field.
    pub fn boolean(name: impl Into<String>) -> Self {
        Field::new(name, FieldType::Boolean)
    }

    /// Makes the field required: an attribute object must carry a non-null value.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Describes the field to the model.
    pub fn doc(mut self, doc: impl Into<String>) -> Self {
        self.doc = Some(doc.into());
        self
    }

    /// The field's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field's type.
    pub fn field_type(&self) -> FieldType {
        self.ty
    }

    /// Whether the field is required.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// The field's description, if it has one.
    pub fn doc_text(&self) -> Option<&str> {
        self.doc.as_deref()
    }
}

/// A custom entity type: a label, an optional description and typed fields.
///
/// The description tells the model when to choose the type; types whose label alone
/// is ambiguous (`Preference`, `Learning`) are extracted far more reliably with one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityType {
    label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fields: Vec<Field>,
}

impl EntityType {
    /// A type with the given label, no description and no fields.
    pub fn new(label: impl Into<String>) -> Self {
        EntityType {
            label: label.into(),
            description: None,
            fields: Vec::new(),
        }
    }

    /// Sets the description shown to the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Adds a field; fields keep their declaration order.
    pub fn field(mut self, field: Field) -> Self {
        self.fields.push(field);
        self
    }

    /// The label the type's nodes carry (besides `Entity`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The description, if any.
    pub fn description_text(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The fields, in declaration order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }
}

/// One relationship declaration: `from` `verb` `to`, with optional fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relationship {
    from: String,
    verb: String,
    to: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fields: Vec<Field>,
}

impl Relationship {
    /// Declares `from —verb→ to` between two declared entity labels (the same label
    /// twice is allowed).
    pub fn new(from: impl Into<String>, verb: impl Into<String>, to: impl Into<String>) -> Self {
        Relationship {
            from: from.into(),
            verb: verb.into(),
            to: to.into(),
            fields: Vec::new(),
        }
    }

    /// Adds a field carried by facts of this type.
    pub fn field(mut self, field: Field) -> Self {
        self.fields.push(field);
        self
    }

    /// The source label.
    pub fn from_label(&self) -> &str {
        &self.from
    }

    /// The verb as declared.
    pub fn verb(&self) -> &str {
        &self.verb
    }

    /// The target label.
    pub fn to_label(&self) -> &str {
        &self.to
    }

    /// The fields, in declaration order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    fn path(&self) -> String {
        format!(
            "ontology.relationships[{}-{}->{}]",
            self.from, self.verb, self.to
        )
    }
}

/// A relationship type: every declaration of one verb, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationshipType {
    name: String,
    endpoints: Vec<(String, String)>,
    fields: Vec<Field>,
}

impl RelationshipType {
    /// The type in `UPPER_SNAKE_CASE`, e.g. `PREFERS`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared `(source, target)` label pairs, in declaration order.
    pub fn endpoints(&self) -> &[(String, String)] {
        &self.endpoints
    }

    /// The fields, in declaration order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }
}

/// Collects declarations; [`build`](OntologyBuilder::build) checks them all.
///
/// Its serde form is the serde form of [`Ontology`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OntologyBuilder {
    entities: EntityMode,
    relationships: RelationshipMode,
    #[serde(default)]
    entity_types: Vec<EntityType>,
    #[serde(default)]
    edges: Vec<Relationship>,
}

impl OntologyBuilder {
    /// Adds an entity type. Types get prompt ids 1, 2, … in declaration order.
    pub fn entity(mut self, entity: EntityType) -> Self {
        self.entity_types.push(entity);
        self
    }

    /// Adds a relationship declaration.
    pub fn relationship(mut self, relationship: Relationship) -> Self {
        self.edges.push(relationship);
        self
    }

    /// Checks every declaration and builds the ontology. The first mistake, in
    /// declaration order, is returned as [`Error::InvalidInput`].
    pub fn build(self) -> Result<Ontology> {
        let mut labels: HashSet<String> = HashSet::new();
        for entity in &self.entity_types {
            let path = format!("ontology.entities[{}]", entity.label);
            check_label(&path, &entity.label)?;
            if !labels.insert(entity.label.to_ascii_lowercase()) {
                return Err(Error::invalid(path, DUPLICATE));
            }
            check_description(
                &format!("{path}.description"),
                entity.description.as_deref(),
            )?;
            check_fields(
                &path,
                &entity.fields,
                &RESERVED_ENTITY_FIELDS,
                "an entity node",
            )?;
        }

        let mut types: Vec<RelationshipType> = Vec::new();
        for rel in &self.edges {
            let path = rel.path();
            let name = check_verb(&format!("{path}.verb"), &rel.verb)?;
            for (end, label) in [("from", &rel.from), ("to", &rel.to)] {
                if !self.entity_types.iter().any(|e| &e.label == label) {
                    return Err(Error::invalid(
                        format!("{path}.{end}"),
                        format!(
                            "names no declared entity type (declared: {})",
                            self.declared_labels()
                        ),
                    ));
                }
            }
            check_fields(&path, &rel.fields, &RESERVED_RELATIONSHIP_FIELDS, "a fact")?;
            match types.iter_mut().find(|t| t.name == name) {
                None => types.push(RelationshipType {
                    name,
                    endpoints: vec![(rel.from.clone(), rel.to.clone())],
                    fields: rel.fields.clone(),
                }),
                Some(t) => {
                    if t.endpoints
                        .iter()
                        .any(|(f, to)| f == &rel.from && to == &rel.to)
                    {
                        return Err(Error::invalid(path, DUPLICATE));
                    }
                    if t.fields != rel.fields {
                        return Err(Error::invalid(
                            format!("{path}.fields"),
                            format!(
                                "must equal the fields of the first `{name}` declaration \
                                 (`{}-{name}->{}`): one relationship type has one set of fields",
                                t.endpoints[0].0, t.endpoints[0].1
                            ),
                        ));
                    }
                    t.endpoints.push((rel.from.clone(), rel.to.clone()));
                }
            }
        }
        Ok(Ontology {
            inner: Arc::new(Inner {
                declared: self,
                relationship_types: types,
            }),
        })
    }

    fn declared_labels(&self) -> String {
        if self.entity_types.is_empty() {
            return "none".into();
        }
        let labels: Vec<&str> = self.entity_types.iter().map(|e| e.label.as_str()).collect();
        labels.join(", ")
    }
}

const DUPLICATE: &str = "is declared more than once (names are compared ignoring case)";
const IDENTIFIER: &str =
    "must be an identifier: an ASCII letter or `_` followed by ASCII letters, digits or `_`";

fn is_reserved(name: &str, reserved: &[&str]) -> bool {
    reserved.iter().any(|r| r.eq_ignore_ascii_case(name))
}

fn check_label(path: &str, label: &str) -> Result<()> {
    if !is_identifier(label) {
        return Err(Error::invalid(path, IDENTIFIER));
    }
    if !label.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(Error::invalid(
            path,
            "must start with an upper-case ASCII letter, like `Teammate`",
        ));
    }
    if is_reserved(label, &RESERVED_LABELS) {
        return Err(Error::invalid(
            path,
            format!(
                "is reserved: {} are gralkor's own labels",
                RESERVED_LABELS.map(|l| format!("`{l}`")).join(", ")
            ),
        ));
    }
    Ok(())
}

fn check_description(path: &str, description: Option<&str>) -> Result<()> {
    match description {
        Some(d) if d.trim().is_empty() => Err(Error::invalid(
            path,
            "must not be blank (leave it out instead)",
        )),
        _ => Ok(()),
    }
}

/// Returns the relationship type the verb becomes.
fn check_verb(path: &str, verb: &str) -> Result<String> {
    if !is_identifier(verb) {
        return Err(Error::invalid(path, IDENTIFIER));
    }
    let has_lower = verb.chars().any(|c| c.is_ascii_lowercase());
    let has_upper = verb.chars().any(|c| c.is_ascii_uppercase());
    if has_lower && has_upper {
        return Err(Error::invalid(
            path,
            "must be snake_case or UPPER_SNAKE_CASE, like `works_at` or `WORKS_AT`",
        ));
    }
    let name = verb.to_ascii_uppercase();
    if RESERVED_RELATIONSHIP_TYPES.contains(&name.as_str()) {
        return Err(Error::invalid(
            path,
            format!(
                "is reserved: {} are gralkor's own relationship types",
                RESERVED_RELATIONSHIP_TYPES
                    .map(|l| format!("`{l}`"))
                    .join(", ")
            ),
        ));
    }
    Ok(name)
}

fn check_fields(owner: &str, fields: &[Field], reserved: &[&str], what: &str) -> Result<()> {
    let mut seen: HashSet<String> = HashSet::new();
    for field in fields {
        let path = format!("{owner}.fields[{}]", field.name);
        if !is_identifier(&field.name) {
            return Err(Error::invalid(path, IDENTIFIER));
        }
        if is_reserved(&field.name, reserved) {
            return Err(Error::invalid(
                path,
                format!(
                    "is reserved: it is a property of {what} ({}); name the field for what it holds",
                    reserved.join(", ")
                ),
            ));
        }
        if !seen.insert(field.name.to_ascii_lowercase()) {
            return Err(Error::invalid(path, DUPLICATE));
        }
        check_description(&format!("{path}.doc"), field.doc.as_deref())?;
    }
    Ok(())
}

/// A checked ontology. Cheap to clone (one reference count) and shareable across
/// tasks.
///
/// It serialises to its declarations (`{"entities": "strict", "relationships":
/// "scoped", "entity_types": […], "edges": […]}`) and deserialising checks them again,
/// so a stored ontology cannot bypass the rules.
///
/// ```
/// use gralkor::ontology::Ontology;
///
/// let json = r#"{"entities": "open", "relationships": "open",
///                "entity_types": [{"label": "Episodic"}]}"#;
/// let err = serde_json::from_str::<Ontology>(json).unwrap_err();
/// assert!(err.to_string().contains("`ontology.entities[Episodic]` is reserved"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "OntologyBuilder", try_from = "OntologyBuilder")]
pub struct Ontology {
    inner: Arc<Inner>,
}

#[derive(Debug, PartialEq, Eq)]
struct Inner {
    declared: OntologyBuilder,
    relationship_types: Vec<RelationshipType>,
}

impl From<Ontology> for OntologyBuilder {
    fn from(o: Ontology) -> Self {
        o.inner.declared.clone()
    }
}

impl TryFrom<OntologyBuilder> for Ontology {
    type Error = Error;

    fn try_from(b: OntologyBuilder) -> Result<Self> {
        b.build()
    }
}

impl Ontology {
    /// Starts an ontology. Both modes are required: pick them deliberately.
    pub fn builder(entities: EntityMode, relationships: RelationshipMode) -> OntologyBuilder {
        OntologyBuilder {
            entities,
            relationships,
            entity_types: Vec::new(),
            edges: Vec::new(),
        }
    }

    /// The ontology of generic extraction: no types, open entities, open
    /// relationships.
    pub fn generic() -> Ontology {
        Ontology::builder(EntityMode::Open, RelationshipMode::Open)
            .build()
            .expect("an empty ontology is valid")
    }

    /// The entity mode.
    pub fn entity_mode(&self) -> EntityMode {
        self.inner.declared.entities
    }

    /// The relationship mode.
    pub fn relationship_mode(&self) -> RelationshipMode {
        self.inner.declared.relationships
    }

    /// The custom entity types, in declaration order (prompt ids 1, 2, …).
    pub fn entity_types(&self) -> &[EntityType] {
        &self.inner.declared.entity_types
    }

    /// The relationship declarations, as given.
    pub fn relationships(&self) -> &[Relationship] {
        &self.inner.declared.edges
    }

    /// The relationship types, in order of first declaration.
    pub fn relationship_types(&self) -> &[RelationshipType] {
        &self.inner.relationship_types
    }

    /// The custom entity type with exactly this label.
    pub fn entity_type(&self, label: &str) -> Option<&EntityType> {
        self.entity_types().iter().find(|e| e.label == label)
    }

    /// The relationship type a verb names, in any accepted spelling (`prefers` or
    /// `PREFERS`).
    pub fn relationship_type(&self, verb: &str) -> Option<&RelationshipType> {
        self.relationship_types()
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(verb))
    }

    /// The label for a prompt type id: 0 is [`GENERIC_ENTITY_LABEL`], 1… the custom
    /// types in declaration order. `None` for an id out of range.
    pub fn label_for_id(&self, id: usize) -> Option<&str> {
        match id {
            0 => Some(GENERIC_ENTITY_LABEL),
            n => self.entity_types().get(n - 1).map(EntityType::label),
        }
    }

    /// Whether an extracted entity whose type is `label` is kept: custom types always,
    /// the generic `Entity` only under [`EntityMode::Open`], unknown labels never.
    pub fn keeps_entity(&self, label: &str) -> bool {
        if label == GENERIC_ENTITY_LABEL {
            self.entity_mode() == EntityMode::Open
        } else {
            self.entity_type(label).is_some()
        }
    }

    /// Whether a fact `source —verb→ target` may be stored with `verb` as its type.
    /// `source` and `target` are the endpoints' type labels (`Entity` for a generic
    /// one).
    ///
    /// A verb that is no declared type is a generic fact and always allowed. A declared
    /// type is allowed between any entities under [`RelationshipMode::Open`], and only
    /// between its declared endpoints under [`RelationshipMode::Scoped`]; a fact that
    /// is not allowed should be stored as a generic `RELATES_TO` fact without the
    /// type's fields.
    pub fn relationship_allowed(&self, source: &str, verb: &str, target: &str) -> bool {
        match self.relationship_type(verb) {
            None => true,
            Some(_) if self.relationship_mode() == RelationshipMode::Open => true,
            Some(t) => t
                .endpoints
                .iter()
                .any(|(from, to)| from == source && to == target),
        }
    }
}

// The ontology's tests live in `gralkor` (src/llm/ontology_tests.rs): they check the
// schemas it builds against the providers' schema rules, which are gralkor's.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ontologies_are_cheap_clone_send_sync() {
        fn assert_traits<T: Clone + Send + Sync + std::fmt::Debug + 'static>() {}
        assert_traits::<Ontology>();
        let o = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
            .entity(EntityType::new("Teammate"))
            .build()
            .unwrap();
        let c = o.clone();
        assert!(Arc::ptr_eq(&o.inner, &c.inner));
    }
}
