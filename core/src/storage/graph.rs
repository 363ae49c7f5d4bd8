//! The whole-graph payload of a replace-graph Lens, validated in full before anything
//! is removed or inserted.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ontology::is_identifier;
use crate::ontology::{RESERVED_LABELS, RESERVED_RELATIONSHIP_TYPES};
use crate::vocab::value::{float_rule, text_rule};
use crate::vocab::{OWNER_KEY, derived_uuid};
use crate::{Error, Result};

/// The property that marks nodes and relationships as owned by a replace-graph Lens.
/// Any supplied value is overwritten with the Lens's name when the graph is stored.
#[doc(hidden)]
pub const OWNER_PROPERTY: &str = OWNER_KEY;

/// The prefix of property names gralkor keeps for itself; only [`OWNER_PROPERTY`] may
/// be supplied (and it is overwritten).
#[doc(hidden)]
pub const RESERVED_PROPERTY_PREFIX: &str = "_gralkor";

/// The most bytes a replacement's ids and property values may take as sent to the
/// database (64 MiB): the whole graph is replaced in one statement.
#[doc(hidden)]
pub const MAX_REPLACEMENT_BYTES: usize = 64 << 20;

/// Checks that a text can be sent to the database as it is, with the rule the
/// database adapter's encoder enforces (no NUL characters), under `field`, the
/// request's own name for it; returns its size as text.
fn sendable_text(field: &str, text: &str) -> Result<usize> {
    match text_rule(text) {
        Some(rule) => Err(Error::invalid(field, rule)),
        None => Ok(text.len()),
    }
}

/// Checks that a property value (a scalar or a list of scalars, its shape already
/// checked) can be sent to the database as it is, with the rules the database
/// adapter's encoder enforces (no NUL characters, no subnormal numbers, …), under
/// `field` (and `field[i]` inside a list); returns its size as JSON text.
fn sendable(field: &str, value: &Value) -> Result<usize> {
    let check = |at: &dyn Fn() -> String, v: &Value| -> Result<usize> {
        let broken = match v {
            Value::String(s) => text_rule(s),
            Value::Number(n) if !n.is_i64() => n.as_f64().and_then(float_rule),
            _ => None,
        };
        match broken {
            Some(rule) => Err(Error::invalid(at(), rule)),
            None => Ok(v.to_string().len()),
        }
    };
    match value {
        Value::Array(items) => {
            let mut size = 2 + items.len().saturating_sub(1);
            for (i, item) in items.iter().enumerate() {
                size = size.saturating_add(check(&|| format!("{field}[{i}]"), item)?);
            }
            Ok(size)
        }
        v => check(&|| field.to_string(), v),
    }
}

/// The complete current graph of one replace-graph Lens: every node and relationship
/// it owns at its Destination. There are no partial operations: a replacement removes
/// what the Lens owned before and inserts this; an empty graph clears it.
///
/// ```
/// use gralkor::lens::Graph;
/// use serde_json::json;
///
/// let graph = Graph::new()
///     .node("payments", ["System"], json!({"name": "Payments"}))
///     .node("ledger", ["System"], json!({"name": "Ledger"}))
///     .relationship("payments", "DEPENDS_ON", "ledger", json!({"protocol": "events"}));
/// graph.validate()?;
///
/// let dangling = Graph::new().relationship("a", "USES", "b", json!({}));
/// assert!(dangling.validate().unwrap_err().to_string().contains("graph.relationships[0].from"));
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<GraphNode>,
    /// The relationships between them.
    #[serde(default)]
    pub relationships: Vec<GraphRelationship>,
}

/// One node of a replacement graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphNode {
    /// Unique, non-blank id within the graph; relationships name their endpoints by it.
    pub id: String,
    /// Labels: identifiers, not gralkor's own (`Entity`, `Episodic`, `Community`).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Properties: identifier keys; strings, numbers, booleans or lists of them.
    #[serde(default)]
    pub properties: Map<String, Value>,
}

/// One relationship of a replacement graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRelationship {
    /// The id of the source node.
    pub from: String,
    /// The relationship type: an identifier, not one of gralkor's own.
    #[serde(rename = "type")]
    pub rel_type: String,
    /// The id of the target node.
    pub to: String,
    /// Properties, as for nodes.
    #[serde(default)]
    pub properties: Map<String, Value>,
}

fn properties_of(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        // Kept so validation can name it: a non-map becomes one bad entry.
        other => Map::from_iter([(String::new(), other)]),
    }
}

impl Graph {
    /// An empty graph (which, as a replacement, clears the Lens's content).
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds a node. `properties` is a JSON object (`json!({})` or `Value::Null` for
    /// none).
    pub fn node<L: Into<String>>(
        mut self,
        id: impl Into<String>,
        labels: impl IntoIterator<Item = L>,
        properties: Value,
    ) -> Graph {
        self.nodes.push(GraphNode {
            id: id.into(),
            labels: labels.into_iter().map(Into::into).collect(),
            properties: properties_of(properties),
        });
        self
    }

    /// Adds a relationship `from -[rel_type]-> to`.
    pub fn relationship(
        mut self,
        from: impl Into<String>,
        rel_type: impl Into<String>,
        to: impl Into<String>,
        properties: Value,
    ) -> Graph {
        self.relationships.push(GraphRelationship {
            from: from.into(),
            rel_type: rel_type.into(),
            to: to.into(),
            properties: properties_of(properties),
        });
        self
    }

    /// Whether the graph has no nodes and no relationships.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.relationships.is_empty()
    }

    /// Checks the whole graph; the error names the first offending item
    /// (`graph.nodes[2].labels[0]`) and the rule it broke. Everything the database
    /// could not take is refused here, before anything is removed: ids and property
    /// values are checked with the rules the database adapter's encoder enforces (no
    /// NUL characters, no subnormal numbers, …; one rule, shared), under the
    /// request's field names; integers must fit in 64 bits; the whole graph must fit
    /// in `MAX_REPLACEMENT_BYTES` as text.
    pub fn validate(&self) -> Result<()> {
        let mut ids = HashSet::new();
        let mut size: usize = 0;
        for (i, node) in self.nodes.iter().enumerate() {
            let field = format!("graph.nodes[{i}]");
            if node.id.trim().is_empty() {
                return Err(Error::invalid(format!("{field}.id"), "must not be blank"));
            }
            size = size.saturating_add(sendable_text(&format!("{field}.id"), &node.id)?);
            if !ids.insert(node.id.as_str()) {
                return Err(Error::invalid(
                    format!("{field}.id"),
                    format!("must be unique (`{}` appears more than once)", node.id),
                ));
            }
            for (j, label) in node.labels.iter().enumerate() {
                let lf = format!("{field}.labels[{j}]");
                check_name(&lf, label, &RESERVED_LABELS)?;
                if node.labels[..j].contains(label) {
                    return Err(Error::invalid(
                        lf,
                        format!("must not repeat a label (`{label}` is given twice)"),
                    ));
                }
            }
            size = size.saturating_add(check_properties(
                &format!("{field}.properties"),
                &node.properties,
            )?);
        }
        for (i, rel) in self.relationships.iter().enumerate() {
            let field = format!("graph.relationships[{i}]");
            for (end, id) in [("from", &rel.from), ("to", &rel.to)] {
                if !ids.contains(id.as_str()) {
                    return Err(Error::invalid(
                        format!("{field}.{end}"),
                        format!("must name a node of the graph (no node has id `{id}`)"),
                    ));
                }
                size = size.saturating_add(id.len());
            }
            check_name(
                &format!("{field}.type"),
                &rel.rel_type,
                &RESERVED_RELATIONSHIP_TYPES,
            )?;
            size = size.saturating_add(check_properties(
                &format!("{field}.properties"),
                &rel.properties,
            )?);
        }
        if size > MAX_REPLACEMENT_BYTES {
            return Err(Error::invalid(
                "graph",
                format!(
                    "must be at most {MAX_REPLACEMENT_BYTES} bytes as text \
                     (ids and property values come to {size})"
                ),
            ));
        }
        Ok(())
    }
}

fn check_name(field: &str, name: &str, reserved: &[&str]) -> Result<()> {
    if name.trim().is_empty() {
        return Err(Error::invalid(field, "must not be blank"));
    }
    if !is_identifier(name) {
        return Err(Error::invalid(
            field,
            format!(
                "must be an identifier (a letter or `_`, then letters, digits or `_`; got `{name}`)"
            ),
        ));
    }
    if let Some(r) = reserved.iter().find(|r| r.eq_ignore_ascii_case(name)) {
        return Err(Error::invalid(
            field,
            format!("`{name}` is reserved: gralkor uses `{r}` itself"),
        ));
    }
    Ok(())
}

/// Whether a JSON number can be stored as it is: any double, or an integer that fits
/// in 64 signed bits (a larger one would silently become a double).
fn storable_number(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_i64() || n.is_f64(),
        _ => true,
    }
}

/// Checks a property map; returns the size of its values as text.
fn check_properties(field: &str, properties: &Map<String, Value>) -> Result<usize> {
    let mut size: usize = 0;
    for (key, value) in properties {
        let kf = format!("{field}.{key}");
        if key.is_empty() {
            return Err(Error::invalid(field, "must be a map of properties"));
        }
        if !is_identifier(key) {
            return Err(Error::invalid(kf, "must be an identifier property name"));
        }
        if key.starts_with(RESERVED_PROPERTY_PREFIX) && key != OWNER_PROPERTY {
            return Err(Error::invalid(
                kf,
                format!(
                    "is reserved: property names beginning `{RESERVED_PROPERTY_PREFIX}` belong to gralkor"
                ),
            ));
        }
        let out_of_range = || {
            Error::invalid(
                kf.clone(),
                format!(
                    "must be an integer between {} and {} or a floating-point number",
                    i64::MIN,
                    i64::MAX
                ),
            )
        };
        match value {
            Value::String(_) | Value::Bool(_) => {}
            Value::Number(_) => {
                if !storable_number(value) {
                    return Err(out_of_range());
                }
            }
            Value::Array(items) => {
                if let Some(k) = items.iter().position(|v| {
                    !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
                }) {
                    return Err(Error::invalid(
                        format!("{kf}[{k}]"),
                        "must be a string, number or boolean (lists hold scalars only)",
                    ));
                }
                if let Some(k) = items.iter().position(|v| !storable_number(v)) {
                    return Err(Error::invalid(
                        format!("{kf}[{k}]"),
                        format!(
                            "must be an integer between {} and {} or a floating-point number",
                            i64::MIN,
                            i64::MAX
                        ),
                    ));
                }
            }
            Value::Null => {
                return Err(Error::invalid(
                    kf,
                    "must not be null (omit the property instead)",
                ));
            }
            Value::Object(_) => {
                return Err(Error::invalid(
                    kf,
                    "must be a string, number, boolean or list of them, not a map",
                ));
            }
        }
        if key != OWNER_PROPERTY {
            size = size.saturating_add(sendable(&kf, value)?);
        }
    }
    Ok(size)
}

/// The uuid of the replace-graph node `id` in `graph`:
/// the derived uuid (SHA-256 over a namespace and length-prefixed parts, version 8)
/// over the logical graph id and the
/// node id. Both storages give a node this uuid, so a node found by search is the same
/// node whichever storage holds it.
///
/// ```
/// use gralkor::storage::{GraphId, owned_node_uuid};
///
/// let g = GraphId::new("global")?;
/// assert_eq!(owned_node_uuid(&g, "payments"), owned_node_uuid(&g, "payments"));
/// assert_ne!(owned_node_uuid(&g, "payments"), owned_node_uuid(&GraphId::new("ops")?, "payments"));
/// # Ok::<(), gralkor::Error>(())
/// ```
#[doc(hidden)]
pub fn owned_node_uuid(graph: &super::GraphId, id: &str) -> uuid::Uuid {
    derived_uuid("owned", &[graph.as_str().as_bytes(), id.as_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(g: Graph) -> String {
        g.validate().unwrap_err().to_string()
    }

    #[test]
    fn a_valid_graph_and_the_empty_graph_pass() {
        Graph::new().validate().unwrap();
        Graph::new()
            .node(
                "a",
                ["System"],
                json!({"name": "A", "tags": ["x", 1, true], "n": 1.5}),
            )
            .node("b", Vec::<String>::new(), Value::Null)
            .relationship("a", "DEPENDS_ON", "b", json!({OWNER_PROPERTY: "someone"}))
            .relationship("a", "loops", "a", json!({}))
            .validate()
            .unwrap();
    }

    #[test]
    fn node_ids_must_be_unique_and_non_blank() {
        let e = err(Graph::new().node(" ", ["A"], json!({})));
        assert!(e.contains("graph.nodes[0].id` must not be blank"), "{e}");
        let e = err(Graph::new()
            .node("a", ["A"], json!({}))
            .node("a", ["B"], json!({})));
        assert!(e.contains("graph.nodes[1].id` must be unique"), "{e}");
    }

    #[test]
    fn labels_and_types_must_be_identifiers_and_not_reserved() {
        let e = err(Graph::new().node("a", [""], json!({})));
        assert!(
            e.contains("graph.nodes[0].labels[0]` must not be blank"),
            "{e}"
        );
        let e = err(Graph::new().node("a", ["Ok", "has space"], json!({})));
        assert!(
            e.contains("graph.nodes[0].labels[1]` must be an identifier"),
            "{e}"
        );
        let e = err(Graph::new().node("a", ["episodic"], json!({})));
        assert!(e.contains("is reserved"), "{e}");
        let g = Graph::new().node("a", ["A"], json!({}));
        let e = err(g.clone().relationship("a", "DEPENDS ON", "a", json!({})));
        assert!(
            e.contains("graph.relationships[0].type` must be an identifier"),
            "{e}"
        );
        let e = err(g.relationship("a", "MENTIONS", "a", json!({})));
        assert!(e.contains("graph.relationships[0].type"), "{e}");
    }

    #[test]
    fn endpoints_must_exist() {
        let g = Graph::new().node("a", ["A"], json!({}));
        let e = err(g.clone().relationship("a", "R", "zz", json!({})));
        assert!(
            e.contains("graph.relationships[0].to` must name a node"),
            "{e}"
        );
        let e = err(g.relationship("zz", "R", "a", json!({})));
        assert!(e.contains("graph.relationships[0].from"), "{e}");
    }

    #[test]
    fn properties_must_be_flat_maps_with_identifier_keys() {
        let n = |p| err(Graph::new().node("a", ["A"], p));
        assert!(n(json!({"bad key": 1})).contains("properties.bad key"));
        assert!(n(json!({"x": null})).contains("must not be null"));
        assert!(n(json!({"x": {"y": 1}})).contains("not a map"));
        assert!(n(json!({"x": [1, [2]]})).contains("properties.x[1]"));
        assert!(n(json!({"_gralkor_writer": "me"})).contains("reserved"));
        assert!(n(json!("not a map")).contains("must be a map of properties"));
    }

    #[test]
    fn graphs_deserialise_with_type_and_reject_unknown_fields() {
        let g: Graph = serde_json::from_value(json!({
            "nodes": [{"id": "a", "labels": ["System"], "properties": {"name": "A"}}],
            "relationships": [{"from": "a", "to": "a", "type": "USES"}]
        }))
        .unwrap();
        g.validate().unwrap();
        assert_eq!(g.relationships[0].rel_type, "USES");
        assert!(serde_json::from_value::<Graph>(json!({"nodes": [], "edges": []})).is_err());
    }

    #[test]
    fn values_the_storage_could_not_take_are_refused_naming_the_request_field() {
        let n = |p| err(Graph::new().node("a", ["A"], json!({})).node("b", ["A"], p));
        let e = err(Graph::new().node("a\0", ["A"], json!({})));
        assert!(e.contains("`graph.nodes[0].id` must not contain"), "{e}");
        let e = n(json!({"name": "x\0y"}));
        assert!(
            e.contains("`graph.nodes[1].properties.name` must not contain"),
            "{e}"
        );
        let e = n(json!({"tags": ["ok", "\0"]}));
        assert!(
            e.contains("`graph.nodes[1].properties.tags[1]` must not contain"),
            "{e}"
        );
        let e = n(json!({"big": u64::MAX}));
        assert!(
            e.contains("`graph.nodes[1].properties.big` must be an integer between"),
            "{e}"
        );
        let e = n(json!({"sizes": [1, 9223372036854775808u64]}));
        assert!(e.contains("`graph.nodes[1].properties.sizes[1]`"), "{e}");
        let e = n(json!({"tiny": 5e-324}));
        assert!(
            e.contains("`graph.nodes[1].properties.tiny` must not be a subnormal"),
            "{e}"
        );
        let e = err(Graph::new().node("a", ["A"], json!({})).relationship(
            "a",
            "R",
            "a",
            json!({"via": "\0"}),
        ));
        assert!(
            e.contains("`graph.relationships[0].properties.via` must not contain"),
            "{e}"
        );
        let e = err(Graph::new().node("a", ["A", "B", "A"], json!({})));
        assert!(
            e.contains("`graph.nodes[0].labels[2]` must not repeat a label (`A` is given twice)"),
            "{e}"
        );
        // The extremes that can be stored are fine.
        Graph::new()
            .node(
                "a",
                ["A"],
                json!({"min": i64::MIN, "max": i64::MAX, "f": f64::MAX, "g": f64::MIN_POSITIVE,
                       "z": -0.0, "s": "it's \\ \"quoted\" 😀\n", "l": []}),
            )
            .validate()
            .unwrap();
    }

    #[test]
    fn a_replacement_over_the_size_limit_is_refused() {
        let half = "x".repeat(MAX_REPLACEMENT_BYTES / 2);
        let fits = Graph::new().node("a", ["A"], json!({"text": half}));
        fits.validate().unwrap();
        let e = err(fits.node("b", ["A"], json!({"text": half})));
        assert!(
            e.contains("`graph` must be at most 67108864 bytes as text"),
            "{e}"
        );
    }
}
