//! The row codec: values to query parameters and reply rows back to records, with
//! errors that name the record and the field.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::falkordb::{QueryResult, Value};
use crate::graph::model::Timestamp;
use crate::{Error, Result};

/// A list of uuids as a list of strings.
pub(crate) fn uuids(list: &[Uuid]) -> Value {
    Value::List(list.iter().map(|u| Value::String(u.to_string())).collect())
}

/// An optional instant as an integer or null.
pub(crate) fn ts(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::Int(t.0))
}

/// A JSON object as its text.
pub(crate) fn json_text(map: &serde_json::Map<String, serde_json::Value>) -> Value {
    Value::String(serde_json::Value::Object(map.clone()).to_string())
}

/// The rows of a reply as maps.
pub(crate) fn rows(res: QueryResult) -> Vec<BTreeMap<String, Value>> {
    res.into_maps()
}

/// One reply row of a stored record, read with errors that name the record and field.
pub(crate) struct Row<'a> {
    kind: &'static str,
    row: &'a BTreeMap<String, Value>,
}

impl<'a> Row<'a> {
    pub(crate) fn new(kind: &'static str, row: &'a BTreeMap<String, Value>) -> Self {
        Row { kind, row }
    }

    pub(crate) fn bad(&self, field: &str) -> Error {
        Error::Protocol(format!(
            "stored {} has a missing or malformed `{field}`",
            self.kind
        ))
    }

    pub(crate) fn get(&self, field: &str) -> &'a Value {
        self.row.get(field).unwrap_or(&Value::Null)
    }

    pub(crate) fn str(&self, field: &str) -> Result<&'a str> {
        self.get(field).as_str().ok_or_else(|| self.bad(field))
    }

    /// A string; a missing (null) one reads as `None`.
    pub(crate) fn opt_str(&self, field: &str) -> Result<Option<&'a str>> {
        match self.get(field) {
            Value::Null => Ok(None),
            v => v.as_str().map(Some).ok_or_else(|| self.bad(field)),
        }
    }

    pub(crate) fn uuid(&self, field: &str) -> Result<Uuid> {
        Uuid::parse_str(self.str(field)?).map_err(|_| self.bad(field))
    }

    pub(crate) fn ts(&self, field: &str) -> Result<Timestamp> {
        self.opt_ts(field)?.ok_or_else(|| self.bad(field))
    }

    pub(crate) fn opt_ts(&self, field: &str) -> Result<Option<Timestamp>> {
        match self.get(field) {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(Timestamp(*i))),
            _ => Err(self.bad(field)),
        }
    }

    /// A list; a missing (null) one reads as empty.
    pub(crate) fn list(&self, field: &str) -> Result<&'a [Value]> {
        match self.get(field) {
            Value::Null => Ok(&[]),
            v => v.as_list().ok_or_else(|| self.bad(field)),
        }
    }

    pub(crate) fn uuid_list(&self, field: &str) -> Result<Vec<Uuid>> {
        self.list(field)?
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .ok_or_else(|| self.bad(field))
            })
            .collect()
    }

    pub(crate) fn embedding(&self, field: &str) -> Result<Option<Vec<f32>>> {
        match self.get(field) {
            Value::Null => Ok(None),
            Value::Vector(v) => Ok(Some(v.clone())),
            _ => Err(self.bad(field)),
        }
    }

    pub(crate) fn json(&self, field: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
        match self.get(field) {
            Value::Null => Ok(serde_json::Map::new()),
            Value::String(s) => match serde_json::from_str(s) {
                Ok(serde_json::Value::Object(m)) => Ok(m),
                _ => Err(self.bad(field)),
            },
            _ => Err(self.bad(field)),
        }
    }
}
