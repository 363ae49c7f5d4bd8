//! Parsing of `GRAPH.QUERY … --compact` replies into typed values.
//!
//! The compact form tags every value with its type, so integers, doubles, booleans and
//! strings are told apart exactly (the verbose form sends everything as text). Labels,
//! property keys and relationship types arrive as numeric ids into the graph's schema,
//! which the caller resolves through a per-graph [`Schema`] cache; when an id is not in
//! the cache the parse reports [`ParseError::UnknownId`] and the caller refreshes it.

use std::collections::BTreeMap;

use redis::Value as R;

use super::value::{Edge, Node, Path, Value};

/// The result of one query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryResult {
    /// Column names, in `RETURN` order. Empty for queries that return nothing.
    pub columns: Vec<String>,
    /// Rows; each has one value per column.
    pub rows: Vec<Vec<Value>>,
    /// What the query changed and how long it took.
    pub stats: QueryStats,
}

impl QueryResult {
    /// The position of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// The value in row `row` under column `name`.
    pub fn get(&self, row: usize, name: &str) -> Option<&Value> {
        let c = self.column(name)?;
        self.rows.get(row)?.get(c)
    }

    /// The values of column `name`, one per row (empty if there is no such column).
    pub fn column_values<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Value> + 'a {
        let c = self.column(name);
        self.rows
            .iter()
            .filter_map(move |r| c.and_then(|c| r.get(c)))
    }

    /// Rows as column-name → value maps.
    pub fn into_maps(self) -> Vec<BTreeMap<String, Value>> {
        let cols = self.columns;
        self.rows
            .into_iter()
            .map(|r| cols.iter().cloned().zip(r).collect())
            .collect()
    }
}

/// Statistics FalkorDB reports for a query.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct QueryStats {
    /// `Labels added`.
    pub labels_added: u64,
    /// `Nodes created`.
    pub nodes_created: u64,
    /// `Nodes deleted`.
    pub nodes_deleted: u64,
    /// `Properties set`.
    pub properties_set: u64,
    /// `Properties removed`.
    pub properties_removed: u64,
    /// `Relationships created`.
    pub relationships_created: u64,
    /// `Relationships deleted`.
    pub relationships_deleted: u64,
    /// `Indices created`.
    pub indices_created: u64,
    /// `Indices deleted`.
    pub indices_deleted: u64,
    /// Whether the server reused a cached execution plan.
    pub cached_execution: bool,
    /// Server-side execution time in milliseconds.
    pub execution_time_ms: f64,
}

impl QueryStats {
    fn parse(items: &[R]) -> Self {
        let mut s = QueryStats::default();
        for item in items {
            let Some(text) = as_text(item) else { continue };
            let Some((key, val)) = text.split_once(':') else {
                continue;
            };
            let val = val.trim();
            let num = || {
                val.split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let n = num() as u64;
            match key.trim() {
                "Labels added" => s.labels_added = n,
                "Nodes created" => s.nodes_created = n,
                "Nodes deleted" => s.nodes_deleted = n,
                "Properties set" => s.properties_set = n,
                "Properties removed" => s.properties_removed = n,
                "Relationships created" => s.relationships_created = n,
                "Relationships deleted" => s.relationships_deleted = n,
                "Indices created" => s.indices_created = n,
                "Indices deleted" => s.indices_deleted = n,
                "Cached execution" => s.cached_execution = n == 1,
                "Query internal execution time" => s.execution_time_ms = num(),
                _ => {}
            }
        }
        s
    }
}

/// The names behind a graph's numeric schema ids.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    pub labels: Vec<String>,
    pub property_keys: Vec<String>,
    pub relationship_types: Vec<String>,
}

/// Why a reply could not be parsed.
#[derive(Debug)]
pub(crate) enum ParseError {
    /// A schema id is not in the cache: refresh it and parse again.
    UnknownId,
    /// The reply does not have the shape FalkorDB's protocol promises.
    Malformed(String),
}

type PResult<T> = Result<T, ParseError>;

fn malformed<T>(what: impl Into<String>) -> PResult<T> {
    Err(ParseError::Malformed(what.into()))
}

fn as_text(v: &R) -> Option<&str> {
    match v {
        R::BulkString(b) => std::str::from_utf8(b).ok(),
        R::SimpleString(s) => Some(s),
        R::VerbatimString { text, .. } => Some(text),
        _ => None,
    }
}

fn as_array(v: &R) -> PResult<&[R]> {
    match v {
        R::Array(a) | R::Set(a) => Ok(a),
        other => malformed(format!("expected an array, got {other:?}")),
    }
}

fn as_i64(v: &R) -> PResult<i64> {
    match v {
        R::Int(i) => Ok(*i),
        other => match as_text(other).and_then(|t| t.parse().ok()) {
            Some(i) => Ok(i),
            None => malformed(format!("expected an integer, got {other:?}")),
        },
    }
}

fn as_f64(v: &R) -> PResult<f64> {
    match v {
        R::Double(d) => Ok(*d),
        R::Int(i) => Ok(*i as f64),
        other => match as_text(other).and_then(parse_double) {
            Some(d) => Ok(d),
            None => malformed(format!("expected a double, got {other:?}")),
        },
    }
}

fn parse_double(t: &str) -> Option<f64> {
    match t {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" | "-nan" => Some(f64::NAN),
        // The server writes doubles with 15 significant digits, so the largest finite
        // ones come back rounded past f64::MAX: they are finite, the largest there is.
        t => t.parse::<f64>().ok().map(|d| {
            if d.is_infinite() {
                f64::MAX.copysign(d)
            } else {
                d
            }
        }),
    }
}

fn as_string(v: &R) -> PResult<String> {
    match v {
        R::BulkString(b) => match String::from_utf8(b.clone()) {
            Ok(s) => Ok(s),
            Err(_) => malformed("a string is not valid UTF-8"),
        },
        other => match as_text(other) {
            Some(t) => Ok(t.to_owned()),
            None => malformed(format!("expected a string, got {other:?}")),
        },
    }
}

fn lookup(names: &[String], id: i64) -> PResult<String> {
    usize::try_from(id)
        .ok()
        .and_then(|i| names.get(i))
        .cloned()
        .ok_or(ParseError::UnknownId)
}

/// Parses a whole `GRAPH.QUERY --compact` reply.
pub(crate) fn parse_reply(reply: &R, schema: &Schema) -> PResult<QueryResult> {
    let parts = as_array(reply)?;
    match parts {
        [stats] => Ok(QueryResult {
            stats: QueryStats::parse(as_array(stats)?),
            ..Default::default()
        }),
        [header, rows, stats] => {
            let columns = as_array(header)?
                .iter()
                .map(|col| match col {
                    R::Array(pair) if pair.len() == 2 => as_string(&pair[1]),
                    other => as_string(other),
                })
                .collect::<PResult<Vec<_>>>()?;
            let rows = as_array(rows)?
                .iter()
                .map(|row| {
                    as_array(row)?
                        .iter()
                        .map(|v| parse_value(v, schema))
                        .collect()
                })
                .collect::<PResult<Vec<Vec<Value>>>>()?;
            Ok(QueryResult {
                columns,
                rows,
                stats: QueryStats::parse(as_array(stats)?),
            })
        }
        _ => malformed(format!("a reply with {} parts", parts.len())),
    }
}

/// Parses one `[type, value]` pair.
fn parse_value(v: &R, schema: &Schema) -> PResult<Value> {
    match as_array(v)? {
        [t, val] => parse_typed(as_i64(t)?, val, schema),
        other => malformed(format!("a typed value with {} parts", other.len())),
    }
}

fn parse_typed(t: i64, v: &R, schema: &Schema) -> PResult<Value> {
    Ok(match t {
        1 => Value::Null,
        2 => Value::String(as_string(v)?),
        3 => Value::Int(as_i64(v)?),
        4 => match v {
            R::Boolean(b) => Value::Bool(*b),
            R::Int(i) => Value::Bool(*i != 0),
            other => match as_text(other) {
                Some("true") => Value::Bool(true),
                Some("false") => Value::Bool(false),
                _ => return malformed(format!("expected a boolean, got {other:?}")),
            },
        },
        5 => Value::Float(as_f64(v)?),
        6 => Value::List(
            as_array(v)?
                .iter()
                .map(|x| parse_value(x, schema))
                .collect::<PResult<_>>()?,
        ),
        7 => Value::Edge(parse_edge(v, schema)?),
        8 => Value::Node(parse_node(v, schema)?),
        9 => Value::Path(parse_path(v, schema)?),
        10 => {
            let items = as_array(v)?;
            if items.len() % 2 != 0 {
                return malformed("a map with an odd number of items");
            }
            let mut map = BTreeMap::new();
            for kv in items.chunks(2) {
                map.insert(as_string(&kv[0])?, parse_value(&kv[1], schema)?);
            }
            Value::Map(map)
        }
        11 => match as_array(v)? {
            [lat, lon] => Value::Point {
                latitude: as_f64(lat)?,
                longitude: as_f64(lon)?,
            },
            _ => return malformed("a point without two coordinates"),
        },
        12 => Value::Vector(
            as_array(v)?
                .iter()
                .map(|x| as_f64(x).map(|f| f as f32))
                .collect::<PResult<_>>()?,
        ),
        13 => Value::DateTime(as_i64(v)?),
        14 => Value::Date(as_i64(v)?),
        15 => Value::Time(as_i64(v)?),
        16 => Value::Duration(as_i64(v)?),
        other => return malformed(format!("unknown value type {other}")),
    })
}

fn parse_properties(v: &R, schema: &Schema) -> PResult<BTreeMap<String, Value>> {
    let mut props = BTreeMap::new();
    for p in as_array(v)? {
        match as_array(p)? {
            [key, t, val] => {
                let name = lookup(&schema.property_keys, as_i64(key)?)?;
                props.insert(name, parse_typed(as_i64(t)?, val, schema)?);
            }
            _ => return malformed("a property without key, type and value"),
        }
    }
    Ok(props)
}

fn parse_node(v: &R, schema: &Schema) -> PResult<Node> {
    match as_array(v)? {
        [id, labels, props] => Ok(Node {
            id: as_i64(id)?,
            labels: as_array(labels)?
                .iter()
                .map(|l| lookup(&schema.labels, as_i64(l)?))
                .collect::<PResult<_>>()?,
            properties: parse_properties(props, schema)?,
        }),
        _ => malformed("a node without id, labels and properties"),
    }
}

fn parse_edge(v: &R, schema: &Schema) -> PResult<Edge> {
    match as_array(v)? {
        [id, rel, src, dst, props] => Ok(Edge {
            id: as_i64(id)?,
            rel_type: lookup(&schema.relationship_types, as_i64(rel)?)?,
            src: as_i64(src)?,
            dst: as_i64(dst)?,
            properties: parse_properties(props, schema)?,
        }),
        _ => malformed("an edge without id, type, endpoints and properties"),
    }
}

fn parse_path(v: &R, schema: &Schema) -> PResult<Path> {
    let [nodes, edges] = as_array(v)? else {
        return malformed("a path without nodes and edges");
    };
    let nodes = match parse_value(nodes, schema)? {
        Value::List(items) => items
            .into_iter()
            .map(|n| match n {
                Value::Node(n) => Ok(n),
                _ => malformed("a path whose nodes are not nodes"),
            })
            .collect::<PResult<_>>()?,
        _ => return malformed("a path without a node list"),
    };
    let edges = match parse_value(edges, schema)? {
        Value::List(items) => items
            .into_iter()
            .map(|e| match e {
                Value::Edge(e) => Ok(e),
                _ => malformed("a path whose edges are not edges"),
            })
            .collect::<PResult<_>>()?,
        _ => return malformed("a path without an edge list"),
    };
    Ok(Path { nodes, edges })
}

/// Parses the single-column string list returned by `CALL db.labels()` and friends.
pub(crate) fn parse_name_list(reply: &R) -> PResult<Vec<String>> {
    let result = parse_reply(reply, &Schema::default())?;
    result
        .rows
        .into_iter()
        .map(|row| match row.into_iter().next() {
            Some(Value::String(s)) => Ok(s),
            other => malformed(format!("expected a name, got {other:?}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bs(s: &str) -> R {
        R::BulkString(s.as_bytes().to_vec())
    }
    fn arr(v: Vec<R>) -> R {
        R::Array(v)
    }
    fn typed(t: i64, v: R) -> R {
        arr(vec![R::Int(t), v])
    }

    #[test]
    fn write_only_reply_has_stats_only() {
        let reply = arr(vec![arr(vec![
            bs("Nodes created: 2"),
            bs("Properties set: 8"),
            bs("Cached execution: 1"),
            bs("Query internal execution time: 0.396500 milliseconds"),
        ])]);
        let r = parse_reply(&reply, &Schema::default()).unwrap();
        assert!(r.columns.is_empty());
        assert_eq!(r.stats.nodes_created, 2);
        assert_eq!(r.stats.properties_set, 8);
        assert!(r.stats.cached_execution);
        assert!((r.stats.execution_time_ms - 0.3965).abs() < 1e-9);
    }

    #[test]
    fn unknown_schema_id_asks_for_refresh() {
        let node = typed(8, arr(vec![R::Int(0), arr(vec![R::Int(3)]), arr(vec![])]));
        let reply = arr(vec![
            arr(vec![arr(vec![R::Int(1), bs("n")])]),
            arr(vec![arr(vec![node])]),
            arr(vec![]),
        ]);
        assert!(matches!(
            parse_reply(&reply, &Schema::default()),
            Err(ParseError::UnknownId)
        ));
    }

    #[test]
    fn malformed_shapes_are_reported() {
        let reply = arr(vec![R::Int(1), R::Int(2)]);
        assert!(matches!(
            parse_reply(&reply, &Schema::default()),
            Err(ParseError::Malformed(_))
        ));
        let bad_type = typed(99, R::Nil);
        assert!(matches!(
            parse_value(&bad_type, &Schema::default()),
            Err(ParseError::Malformed(_))
        ));
    }
}
