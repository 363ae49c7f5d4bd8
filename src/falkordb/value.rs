//! Typed values: what query parameters are made of and what replies parse into.

use std::collections::BTreeMap;

/// A value sent to FalkorDB as a query parameter or read back from a reply.
///
/// Parameters may use the scalar variants, [`Value::List`], [`Value::Map`] and
/// [`Value::Vector`]; graph elements ([`Value::Node`], [`Value::Edge`], [`Value::Path`])
/// and temporal values only come back in replies.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A double. FalkorDB stores all 64 bits but formats doubles in replies with 15
    /// significant digits, so a value read back may differ in the last digits.
    Float(f64),
    /// A UTF-8 string.
    String(String),
    /// A list of values.
    List(Vec<Value>),
    /// A map with string keys.
    Map(BTreeMap<String, Value>),
    /// A 32-bit float vector (`vecf32`). As a parameter it travels as a list of
    /// floats (FalkorDB accepts only literals there), so the query wraps it:
    /// `SET n.embedding = vecf32($v)`.
    Vector(Vec<f32>),
    /// A node.
    Node(Node),
    /// A relationship.
    Edge(Edge),
    /// A path: alternating nodes and relationships.
    Path(Path),
    /// A geographic point.
    Point {
        /// Latitude in degrees.
        latitude: f64,
        /// Longitude in degrees.
        longitude: f64,
    },
    /// A `localdatetime`, as seconds since the Unix epoch.
    DateTime(i64),
    /// A `date`, as seconds since the Unix epoch at midnight.
    Date(i64),
    /// A `localtime`, as seconds (FalkorDB's own epoch encoding).
    Time(i64),
    /// A `duration`, in seconds.
    Duration(i64),
}

/// A node read back from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// FalkorDB's internal id (reused after deletion; not a stable identity).
    pub id: i64,
    /// The node's labels.
    pub labels: Vec<String>,
    /// The node's properties.
    pub properties: BTreeMap<String, Value>,
}

/// A relationship read back from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// FalkorDB's internal id.
    pub id: i64,
    /// The relationship type.
    pub rel_type: String,
    /// Internal id of the source node.
    pub src: i64,
    /// Internal id of the destination node.
    pub dst: i64,
    /// The relationship's properties.
    pub properties: BTreeMap<String, Value>,
}

/// A path read back from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// The nodes along the path, in order.
    pub nodes: Vec<Node>,
    /// The relationships between consecutive nodes.
    pub edges: Vec<Edge>,
}

impl Value {
    /// The value as JSON: scalars, lists and maps as themselves (a non-finite float as
    /// `null`), a vector as an array of numbers, a node or relationship as its property
    /// map, a point as `{latitude, longitude}`, temporal values as their integer
    /// encodings, a path as `null`.
    ///
    /// ```
    /// use gralkor::falkordb::Value;
    /// let v = Value::List(vec![Value::Int(1), Value::String("a".into()), Value::Null]);
    /// assert_eq!(v.to_json(), serde_json::json!([1, "a", null]));
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        let map = |m: &BTreeMap<String, Value>| {
            J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
        };
        match self {
            Value::Null | Value::Path(_) => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i)
            | Value::DateTime(i)
            | Value::Date(i)
            | Value::Time(i)
            | Value::Duration(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::String(s) => J::String(s.clone()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => map(m),
            Value::Vector(v) => J::Array(
                v.iter()
                    .map(|f| serde_json::Number::from_f64(f64::from(*f)).map_or(J::Null, J::Number))
                    .collect(),
            ),
            Value::Node(n) => map(&n.properties),
            Value::Edge(e) => map(&e.properties),
            Value::Point {
                latitude,
                longitude,
            } => {
                serde_json::json!({"latitude": latitude, "longitude": longitude})
            }
        }
    }

    /// The string, if this is a [`Value::String`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is a [`Value::Int`].
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number as `f64`, if this is a [`Value::Float`] or [`Value::Int`].
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The items, if this is a [`Value::List`].
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The entries, if this is a [`Value::Map`].
    pub fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The vector, if this is a [`Value::Vector`].
    pub fn as_vector(&self) -> Option<&[f32]> {
        match self {
            Value::Vector(v) => Some(v),
            _ => None,
        }
    }

    /// The node, if this is a [`Value::Node`].
    pub fn as_node(&self) -> Option<&Node> {
        match self {
            Value::Node(n) => Some(n),
            _ => None,
        }
    }

    /// The relationship, if this is a [`Value::Edge`].
    pub fn as_edge(&self) -> Option<&Edge> {
        match self {
            Value::Edge(e) => Some(e),
            _ => None,
        }
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

macro_rules! from_impl {
    ($t:ty, $v:ident => $e:expr) => {
        impl From<$t> for Value {
            fn from($v: $t) -> Self {
                $e
            }
        }
    };
}

from_impl!(bool, b => Value::Bool(b));
from_impl!(i64, i => Value::Int(i));
from_impl!(i32, i => Value::Int(i.into()));
from_impl!(u32, i => Value::Int(i.into()));
from_impl!(f64, f => Value::Float(f));
from_impl!(String, s => Value::String(s));
from_impl!(&str, s => Value::String(s.to_owned()));
from_impl!(&String, s => Value::String(s.clone()));
from_impl!(Vec<f32>, v => Value::Vector(v));
from_impl!(&[f32], v => Value::Vector(v.to_vec()));
from_impl!(BTreeMap<String, Value>, m => Value::Map(m));

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(v)
    }
}

impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Self {
        Value::List(v.into_iter().map(Value::String).collect())
    }
}

impl From<&[&str]> for Value {
    fn from(v: &[&str]) -> Self {
        Value::List(v.iter().map(|s| Value::from(*s)).collect())
    }
}

impl From<serde_json::Value> for Value {
    /// JSON maps to the scalar, list and map variants; numbers become `Int` when they
    /// fit in `i64`, else `Float`.
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(a) => Value::List(a.into_iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => {
                Value::Map(o.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}
