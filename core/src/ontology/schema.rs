//! Projections of an ontology: the type list a prompt shows, JSON schemas for
//! attributes, and the check of an attribute object against a type's fields.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{
    EntityMode, EntityType, Field, FieldType, GENERIC_ENTITY_LABEL, Ontology, RelationshipMode,
    RelationshipType,
};
use crate::error::{Error, Result};

/// Description of type 0 when generic entities are kept.
const GENERIC_OPEN: &str = "Any entity that none of the other types fits.";
/// Description of type 0 when generic entities are dropped.
const GENERIC_STRICT: &str =
    "An entity that none of the other types fits; such entities are not kept.";

/// One entry of the entity type list a prompt shows: the model answers with `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[doc(hidden)]
pub struct PromptEntityType {
    /// 0 for the generic `Entity`, then 1, 2, … in declaration order.
    pub id: usize,
    /// The type's label.
    pub label: String,
    /// When to choose the type; empty when the type has no description.
    pub description: String,
}

impl Ontology {
    /// The entity types a prompt lists, generic `Entity` first with id 0. The list
    /// depends only on the declarations, so prompts built from it are stable.
    ///
    /// ```
    /// use gralkor::ontology::{EntityMode, EntityType, Ontology, RelationshipMode};
    ///
    /// let o = Ontology::builder(EntityMode::Strict, RelationshipMode::Open)
    ///     .entity(EntityType::new("Teammate").description("A person the agent works with."))
    ///     .build()?;
    /// let types = o.prompt_entity_types();
    /// assert_eq!((types[0].id, types[0].label.as_str()), (0, "Entity"));
    /// assert_eq!((types[1].id, types[1].label.as_str()), (1, "Teammate"));
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn prompt_entity_types(&self) -> Vec<PromptEntityType> {
        let generic = match self.entity_mode() {
            EntityMode::Open => GENERIC_OPEN,
            EntityMode::Strict => GENERIC_STRICT,
        };
        let mut out = vec![PromptEntityType {
            id: 0,
            label: GENERIC_ENTITY_LABEL.into(),
            description: generic.into(),
        }];
        out.extend(
            self.entity_types()
                .iter()
                .enumerate()
                .map(|(i, e)| PromptEntityType {
                    id: i + 1,
                    label: e.label().into(),
                    description: e.description_text().unwrap_or_default().into(),
                }),
        );
        out
    }

    /// The type lists as prompt text: one line per entity type (`<id>. <label>:
    /// <description>`), then, when there are any, one line per relationship type with
    /// its declared endpoints.
    ///
    /// ```
    /// use gralkor::ontology::{EntityMode, EntityType, Ontology, Relationship, RelationshipMode};
    ///
    /// let o = Ontology::builder(EntityMode::Open, RelationshipMode::Scoped)
    ///     .entity(EntityType::new("Teammate").description("A person the agent works with."))
    ///     .relationship(Relationship::new("Teammate", "mentors", "Teammate"))
    ///     .build()?;
    /// assert_eq!(
    ///     o.prompt_text(),
    ///     "Entity types (answer with the id):\n\
    ///      0. Entity: Any entity that none of the other types fits.\n\
    ///      1. Teammate: A person the agent works with.\n\
    ///      \n\
    ///      Relationship types (only between the endpoints listed):\n\
    ///      MENTORS: Teammate -> Teammate\n"
    /// );
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn prompt_text(&self) -> String {
        let mut out = String::from("Entity types (answer with the id):\n");
        for t in self.prompt_entity_types() {
            let _ = write!(out, "{}. {}", t.id, t.label);
            if !t.description.is_empty() {
                let _ = write!(out, ": {}", t.description);
            }
            out.push('\n');
        }
        if !self.relationship_types().is_empty() {
            out.push_str(match self.relationship_mode() {
                RelationshipMode::Scoped => {
                    "\nRelationship types (only between the endpoints listed):\n"
                }
                RelationshipMode::Open => {
                    "\nRelationship types (usually between the endpoints listed):\n"
                }
            });
            for t in self.relationship_types() {
                let ends: Vec<String> = t
                    .endpoints()
                    .iter()
                    .map(|(from, to)| format!("{from} -> {to}"))
                    .collect();
                let _ = writeln!(out, "{}: {}", t.name(), ends.join(", "));
            }
        }
        out
    }

    /// Checks an attribute object for an entity of type `label` (the generic `Entity`
    /// has no fields, so only `{}` passes). See [`EntityType::check_attributes`].
    pub fn check_entity_attributes(&self, label: &str, attributes: &Value) -> Result<()> {
        if label == GENERIC_ENTITY_LABEL {
            return check_fields(GENERIC_ENTITY_LABEL, &[], attributes);
        }
        match self.entity_type(label) {
            Some(t) => t.check_attributes(attributes),
            None => Err(Error::invalid(
                "label",
                format!("`{label}` is no entity type of this ontology"),
            )),
        }
    }

    /// Checks an attribute object for a fact whose relation is `verb`; a verb that is
    /// no declared type is a generic fact, which has no fields.
    pub fn check_relationship_attributes(&self, verb: &str, attributes: &Value) -> Result<()> {
        match self.relationship_type(verb) {
            Some(t) => t.check_attributes(attributes),
            None => check_fields(verb, &[], attributes),
        }
    }
}

impl EntityType {
    /// The JSON schema of this type's attribute object, in the subset
    /// `crate::llm::schema` accepts. Every field is listed in `required` (so
    /// OpenAI's strict mode applies); an optional field is nullable instead.
    ///
    /// ```
    /// use gralkor::ontology::{EntityType, Field};
    /// use serde_json::json;
    ///
    /// let t = EntityType::new("Teammate").field(Field::integer("age").required());
    /// assert_eq!(t.attributes_schema(), json!({
    ///     "type": "object",
    ///     "description": "Attributes of a `Teammate`.",
    ///     "properties": {"age": {"type": "integer"}},
    ///     "required": ["age"],
    ///     "additionalProperties": false,
    /// }));
    /// ```
    pub fn attributes_schema(&self) -> Value {
        let description = match self.description_text() {
            Some(d) => format!("Attributes of a `{}`: {d}", self.label()),
            None => format!("Attributes of a `{}`.", self.label()),
        };
        object_schema(description, self.fields())
    }

    /// Checks an attribute object against the fields: a JSON object, every required
    /// field present and not null, every present value of its field's type (null
    /// stands for an absent optional field), no other keys. The error names the
    /// attribute (`attributes.age`) and the rule.
    ///
    /// ```
    /// use gralkor::ontology::{EntityType, Field};
    /// use serde_json::json;
    ///
    /// let t = EntityType::new("Teammate").field(Field::integer("age").required());
    /// assert!(t.check_attributes(&json!({"age": 41})).is_ok());
    /// let err = t.check_attributes(&json!({"age": "41"})).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid input: `attributes.age` must be an integer for `Teammate`, got a string"
    /// );
    /// ```
    pub fn check_attributes(&self, attributes: &Value) -> Result<()> {
        check_fields(self.label(), self.fields(), attributes)
    }
}

impl RelationshipType {
    /// The JSON schema of this type's attribute object; see
    /// [`EntityType::attributes_schema`].
    pub fn attributes_schema(&self) -> Value {
        object_schema(
            format!("Attributes of a `{}` fact.", self.name()),
            self.fields(),
        )
    }

    /// Checks an attribute object against the fields; see
    /// [`EntityType::check_attributes`].
    pub fn check_attributes(&self, attributes: &Value) -> Result<()> {
        check_fields(self.name(), self.fields(), attributes)
    }
}

fn json_type(ty: FieldType) -> &'static str {
    match ty {
        FieldType::String => "string",
        FieldType::Integer => "integer",
        FieldType::Float => "number",
        FieldType::Boolean => "boolean",
    }
}

fn object_schema(description: String, fields: &[Field]) -> Value {
    let mut properties = Map::new();
    for f in fields {
        let ty = json_type(f.field_type());
        let mut prop = Map::new();
        prop.insert(
            "type".into(),
            if f.is_required() {
                json!(ty)
            } else {
                json!([ty, "null"])
            },
        );
        if let Some(doc) = f.doc_text() {
            prop.insert("description".into(), json!(doc));
        }
        properties.insert(f.name().into(), Value::Object(prop));
    }
    let required: Vec<&str> = fields.iter().map(Field::name).collect();
    json!({
        "type": "object",
        "description": description,
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn has_type(ty: FieldType, value: &Value) -> bool {
    match ty {
        FieldType::String => value.is_string(),
        // Whole floats count, as in the llm layer's validator (`3.0` is an integer).
        FieldType::Integer => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        FieldType::Float => value.is_number(),
        FieldType::Boolean => value.is_boolean(),
    }
}

fn article(ty: FieldType) -> &'static str {
    match ty {
        FieldType::Integer => "an integer",
        FieldType::String => "a string",
        FieldType::Float => "a float",
        FieldType::Boolean => "a boolean",
    }
}

fn check_fields(owner: &str, fields: &[Field], attributes: &Value) -> Result<()> {
    let Some(map) = attributes.as_object() else {
        return Err(Error::invalid(
            "attributes",
            format!(
                "must be a JSON object for `{owner}`, got {}",
                kind(attributes)
            ),
        ));
    };
    for f in fields {
        let field = format!("attributes.{}", f.name());
        match map.get(f.name()) {
            None | Some(Value::Null) if f.is_required() => {
                return Err(Error::invalid(field, format!("is required by `{owner}`")));
            }
            Some(v) if !v.is_null() && !has_type(f.field_type(), v) => {
                return Err(Error::invalid(
                    field,
                    format!(
                        "must be {} for `{owner}`, got {}",
                        article(f.field_type()),
                        kind(v)
                    ),
                ));
            }
            _ => {}
        }
    }
    if let Some(key) = map.keys().find(|k| !fields.iter().any(|f| f.name() == *k)) {
        let known = if fields.is_empty() {
            "it has no fields".to_owned()
        } else {
            let names: Vec<&str> = fields.iter().map(Field::name).collect();
            format!("its fields: {}", names.join(", "))
        };
        return Err(Error::invalid(
            format!("attributes.{key}"),
            format!("is not a field of `{owner}` ({known})"),
        ));
    }
    Ok(())
}
