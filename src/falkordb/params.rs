//! Query parameters and their encoding into FalkorDB's `CYPHER k=v …` prefix.
//!
//! FalkorDB does not bind parameters server-side: the client writes them as Cypher
//! literals in front of the query text. This module is therefore the security
//! boundary between user data and Cypher, and it is deliberately strict:
//!
//! * strings are single-quoted; `\` and `'` are backslash-escaped. FalkorDB's lexer
//!   keeps any other byte (newlines, control characters, any Unicode) verbatim inside
//!   a quoted literal, so nothing else needs escaping. SQL-style `''` doubling is a
//!   syntax error there and is never used. A NUL character is rejected: the server
//!   reads the query as a C string and would cut it short.
//! * integers are written in decimal; `i64::MIN` parses as a literal.
//! * floats are written in shortest round-trip exponent form (`1.5e0`); NaN, ±inf and
//!   subnormals (which FalkorDB's parser rejects as "Float overflow") are errors.
//! * parameter names and map keys must be identifiers (`[A-Za-z_][A-Za-z0-9_]*`).
//! * vectors are written as lists of finite floats, each in the shortest form that reads
//!   back as the same `f32` (`1.0e-1` for `0.1f32`, about half the bytes of its `f64`
//!   digits): FalkorDB accepts only literals in
//!   the prefix, so a query wraps the parameter itself: `SET n.embedding = vecf32($v)`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::value::Value;
use crate::vocab::value::{NOT_FINITE, float_rule, text_rule};
use crate::{Error, Result};

/// Named parameters of one query.
///
/// ```
/// use gralkor::falkordb::Params;
///
/// let params = Params::new()
///     .set("name", "Alice O'Hara")
///     .set("age", 42)
///     .set("tags", vec!["a".to_string(), "b".to_string()]);
/// assert_eq!(params.len(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    entries: BTreeMap<String, Value>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a parameter. The name is validated when the query is sent.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.entries.insert(name.into(), value.into());
        self
    }

    /// Adds (or replaces) a parameter in place.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.entries.insert(name.into(), value.into());
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The parameter named `name`.
    #[cfg(any(test, feature = "testing"))]
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries.get(name)
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Params {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Params {
            entries: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

pub use crate::vocab::is_identifier;

/// Checks that `s` is an identifier, naming `field` in the error.
pub(crate) fn check_identifier(field: &str, s: &str) -> Result<()> {
    if is_identifier(s) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            "must be an identifier: an ASCII letter or `_` followed by ASCII letters, digits or `_`",
        ))
    }
}

/// Builds the full query text: the `CYPHER …` parameter prefix followed by `query`.
pub(crate) fn build_query(query: &str, params: &Params) -> Result<String> {
    if query.contains('\0') {
        return Err(Error::invalid("query", "must not contain a NUL character"));
    }
    if params.is_empty() {
        return Ok(query.to_owned());
    }
    let mut out = String::with_capacity(query.len() + 16 * params.len() + 8);
    out.push_str("CYPHER");
    for (name, value) in &params.entries {
        let field = format!("params.{name}");
        check_identifier(&field, name)?;
        out.push(' ');
        out.push_str(name);
        out.push('=');
        encode_value(&mut out, value, &field)?;
    }
    out.push(' ');
    out.push_str(query);
    Ok(out)
}

/// Writes `value` as a Cypher literal; `field` names it in an error.
pub(crate) fn encode_value(out: &mut String, value: &Value, field: &str) -> Result<()> {
    encode(out, value).map_err(|bad| {
        let mut name = field.to_owned();
        for part in bad.path.iter().rev() {
            name.push_str(part);
        }
        Error::invalid(name, bad.rule)
    })
}

/// A value [`encode`] refused: the rule, and the path to it from the parameter
/// (innermost first: `[2]`, `.key`), built only on the way out of an error, so that
/// encoding allocates no field names.
struct Bad {
    path: Vec<String>,
    rule: &'static str,
}

impl Bad {
    fn new(rule: &'static str) -> Bad {
        Bad {
            path: Vec::new(),
            rule,
        }
    }

    fn at(mut self, part: String) -> Bad {
        self.path.push(part);
        self
    }
}

fn encode(out: &mut String, value: &Value) -> Result<(), Bad> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => encode_float(out, *f)?,
        Value::String(s) => encode_string(out, s)?,
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(out, item).map_err(|b| b.at(format!("[{i}]")))?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if !is_identifier(k) {
                    return Err(Bad::new(
                        "must be an identifier: an ASCII letter or `_` followed by ASCII letters, digits or `_`",
                    )
                    .at(format!(".{k}")));
                }
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push(':');
                encode(out, v).map_err(|b| b.at(format!(".{k}")))?;
            }
            out.push('}');
        }
        Value::Vector(v) => {
            out.reserve(v.len() * 16 + 2);
            out.push('[');
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !x.is_finite() {
                    return Err(Bad::new(NOT_FINITE).at(format!("[{i}]")));
                }
                encode_f32(out, *x);
            }
            out.push(']');
        }
        Value::Node(_)
        | Value::Edge(_)
        | Value::Path(_)
        | Value::Point { .. }
        | Value::DateTime(_)
        | Value::Date(_)
        | Value::Time(_)
        | Value::Duration(_) => {
            return Err(Bad::new(
                "must be null, a boolean, number, string, list, map or vector: graph elements \
                 and temporal values cannot be sent as parameters",
            ));
        }
    }
    Ok(())
}

fn encode_float(out: &mut String, f: f64) -> Result<(), Bad> {
    if let Some(rule) = float_rule(f) {
        return Err(Bad::new(rule));
    }
    // `{:e}` gives the shortest representation that round-trips, e.g. `1.5e0`, `1e300`.
    let start = out.len();
    let _ = write!(out, "{f:e}");
    if let Some(e) = out[start..].find('e')
        && !out[start..start + e].contains('.')
    {
        out.insert_str(start + e, ".0");
    }
    Ok(())
}

/// A finite `f32` in the shortest exponent form that reads back as the same `f32`
/// (`0.1f32` is `1.0e-1`, not the `1.0000000149011612e-1` of its `f64` value): about
/// half the bytes of the `f64` form for an embedding. The server reads the literal
/// as a double and `vecf32` rounds it to the nearest float, which is `x` again (the
/// shortest form is within half a float ulp of `x`, so far from a rounding boundary;
/// checked on every 7th bit pattern and by `tests/falkordb` on a real server).
/// Subnormal floats are normal doubles, which the parser accepts.
fn encode_f32(out: &mut String, x: f32) {
    let start = out.len();
    let _ = write!(out, "{x:e}");
    if let Some(e) = out[start..].find('e')
        && !out[start..start + e].contains('.')
    {
        out.insert_str(start + e, ".0");
    }
}

fn encode_string(out: &mut String, s: &str) -> Result<(), Bad> {
    if let Some(rule) = text_rule(s) {
        return Err(Bad::new(rule));
    }
    out.reserve(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: impl Into<Value>) -> String {
        let mut s = String::new();
        encode_value(&mut s, &v.into(), "p").unwrap();
        s
    }

    #[test]
    fn strings_escape_backslash_and_quote_only() {
        assert_eq!(enc("it's"), r"'it\'s'");
        assert_eq!(enc(r"a\b"), r"'a\\b'");
        assert_eq!(enc("line\nnext"), "'line\nnext'");
        assert_eq!(enc("é😀"), "'é😀'");
    }

    #[test]
    fn nul_is_rejected_with_field_name() {
        let err = build_query("RETURN $s", &Params::new().set("s", "a\0b")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: `params.s` must not contain a NUL character"
        );
    }

    #[test]
    fn floats_use_round_trip_exponent_form() {
        assert_eq!(enc(1.5), "1.5e0");
        assert_eq!(enc(1e300), "1.0e300");
        assert_eq!(enc(-0.1), "-1e-1".replace("1e", "1.0e"));
        assert_eq!(enc(0.30000000000000004), "3.0000000000000004e-1");
        assert!(build_query("RETURN $x", &Params::new().set("x", f64::NAN)).is_err());
        assert!(build_query("RETURN $x", &Params::new().set("x", f64::INFINITY)).is_err());
        assert!(build_query("RETURN $x", &Params::new().set("x", 5e-324)).is_err());
    }

    #[test]
    fn names_and_keys_must_be_identifiers() {
        let err = build_query("RETURN 1", &Params::new().set("a b", 1)).unwrap_err();
        assert!(
            err.to_string()
                .contains("`params.a b` must be an identifier"),
            "{err}"
        );
        let mut m = BTreeMap::new();
        m.insert("x}) DETACH DELETE n //".to_string(), Value::Int(1));
        let err = build_query("RETURN 1", &Params::new().set("m", m)).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }));
    }

    #[test]
    fn prefix_layout() {
        let q = build_query("RETURN $a, $b", &Params::new().set("b", true).set("a", 1)).unwrap();
        assert_eq!(q, "CYPHER a=1 b=true RETURN $a, $b");
        assert_eq!(build_query("RETURN 1", &Params::new()).unwrap(), "RETURN 1");
    }

    #[test]
    fn vectors_and_graph_elements() {
        assert_eq!(enc(vec![1.0f32, -0.5]), "[1.0e0,-5.0e-1]");
        // The shortest form of the f32, not of its f64 value (1.0000000149011612e-1).
        assert_eq!(
            enc(vec![0.1f32, 1e-40, f32::MAX]),
            "[1.0e-1,1.0e-40,3.4028235e38]"
        );
        let err = build_query("RETURN $v", &Params::new().set("v", vec![f32::NAN])).unwrap_err();
        assert!(err.to_string().contains("params.v[0]"), "{err}");
        let err = build_query("RETURN $d", &Params::new().set("d", Value::Date(0))).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }));
    }

    /// What the server does with a vector component: reads the literal as a double
    /// (`strtod`) and rounds it to a float (`vecf32`). Every one of 200,000 bit
    /// patterns spread over all finite floats comes back bit for bit.
    #[test]
    fn vector_components_read_back_as_the_same_f32() {
        let mut bits: u32 = 0x9e37_79b9;
        for _ in 0..200_000 {
            bits = bits.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let x = f32::from_bits(bits);
            if !x.is_finite() {
                continue;
            }
            let text = enc(vec![x]);
            let back = text[1..text.len() - 1].parse::<f64>().unwrap() as f32;
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e} written as {text}");
            assert!(text.len() <= 17, "{text}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("_a1"));
        assert!(is_identifier("Entity"));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a-b"));
        assert!(!is_identifier("é"));
    }
}
