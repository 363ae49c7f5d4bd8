//! Parsing the server's `INFO` and `MODULE LIST` replies into a [`ServerInfo`].

use crate::vocab::ServerInfo;

/// The server's versions and memory from its `INFO` and `MODULE LIST` replies.
pub(super) fn parse(info: &redis::Value, modules: &redis::Value) -> ServerInfo {
    let text = first_text(info).unwrap_or_default();
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.trim_end()
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(str::to_string)
        })
    };
    let mut server = ServerInfo::default();
    server.redis_version = field("redis_version").or_else(|| field("valkey_version"));
    server.falkordb_version = falkordb_module_version(modules);
    server.used_memory_bytes = field("used_memory").and_then(|v| v.parse().ok());
    server.max_memory_bytes = field("maxmemory").and_then(|v| v.parse().ok());
    server
}

/// The text of an `INFO` reply: a string, or on a cluster the first node's.
fn first_text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::VerbatimString { text, .. } => Some(text.clone()),
        redis::Value::Map(pairs) => pairs.iter().find_map(|(_, v)| first_text(v)),
        redis::Value::Array(items) => items.iter().find_map(first_text),
        _ => None,
    }
}

/// `4.16.2` from `MODULE LIST`'s entry for the module `graph` (version `41602`).
fn falkordb_module_version(v: &redis::Value) -> Option<String> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let modules: Vec<Vec<(&redis::Value, &redis::Value)>> = match v {
        redis::Value::Array(items) => items
            .iter()
            .filter_map(|m| match m {
                redis::Value::Array(kv) => Some(
                    kv.chunks(2)
                        .filter_map(|c| match c {
                            [k, v] => Some((k, v)),
                            _ => None,
                        })
                        .collect(),
                ),
                redis::Value::Map(kv) => Some(kv.iter().map(|(k, v)| (k, v)).collect()),
                _ => None,
            })
            .collect(),
        redis::Value::Map(nodes) => {
            return nodes.iter().find_map(|(_, v)| falkordb_module_version(v));
        }
        _ => return None,
    };
    modules.into_iter().find_map(|kv| {
        let get = |key: &str| {
            kv.iter()
                .find(|(k, _)| text(k).as_deref() == Some(key))
                .map(|(_, v)| *v)
        };
        if get("name").and_then(text).as_deref() != Some("graph") {
            return None;
        }
        let ver = match get("ver")? {
            redis::Value::Int(n) => *n,
            other => text(other)?.parse().ok()?,
        };
        Some(format!(
            "{}.{}.{}",
            ver / 10_000,
            (ver / 100) % 100,
            ver % 100
        ))
    })
}
