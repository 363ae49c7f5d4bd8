//! Fixtures shared by the graph engine's test binaries.

use gralkor::graph::{EntityNode, Timestamp};

/// A timestamp from RFC 3339 text.
pub fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// An entity whose summary exercises quoting, backslashes and Unicode.
pub fn entity(name: &str, labels: &[&str], emb: Option<Vec<f32>>) -> EntityNode {
    let mut e = EntityNode::new(name);
    e.labels = labels.iter().map(|l| l.to_string()).collect();
    e.summary = format!("{name} is someone. It's \"quoted\" \\ and ünïcode");
    e.name_embedding = emb;
    e.created_at = t("1969-07-20T20:17:40.123456Z");
    e
}
