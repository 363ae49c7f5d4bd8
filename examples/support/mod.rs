//! Shared by the examples: how they report an error, and for the benchmarks a
//! deterministic generator, map parameters, latency percentiles, a process's CPU time,
//! and the answers of a scripted model to the engine's four schemas.
#![allow(dead_code)]

use std::time::Duration;

use gralkor::falkordb::Value as Param;
use serde_json::{Value, json};

/// Ends the example on `result`'s error: the message (`Display`, not `Debug`) and each
/// cause on its own line, then exit status 1.
pub fn exit_on_error(result: gralkor::Result<()>) {
    if let Err(e) = result {
        eprintln!("error: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            eprintln!("  caused by: {cause}");
            source = cause.source();
        }
        std::process::exit(1);
    }
}

/// xorshift64*: deterministic data without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }
}

/// A map parameter from `(key, value)` pairs.
pub fn map(pairs: Vec<(&str, Param)>) -> Param {
    Param::Map(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// The `q` quantile of `sorted`, in milliseconds.
pub fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// The numbers after `prefix` at the start of lines ("item 3: …" → 3).
pub fn numbered(text: &str, prefix: &str) -> Vec<i64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|r| r.split(':').next()?.split(' ').next()?.parse().ok())
        .collect()
}

/// The answer to the engine's request for `schema` with the whole `prompt`: the
/// episode "Member A met Member B at Venue C." yields three entities and two facts;
/// nothing is a duplicate; every entity is "A member.".
pub fn answer(schema: &str, prompt: &str) -> Value {
    match schema {
        "extraction" => {
            let episode = prompt
                .split("<CURRENT_EPISODE>")
                .nth(1)
                .and_then(|t| t.split("</CURRENT_EPISODE>").next())
                .unwrap_or("")
                .trim();
            let mut answer = extraction(episode);
            if prompt.contains("<KNOWN_FACTS>") {
                // Nothing is a duplicate or a contradiction.
                for fact in answer["facts"].as_array_mut().into_iter().flatten() {
                    fact["restates"] = json!(-1);
                    fact["contradicts"] = json!([]);
                }
            }
            answer
        }
        "entity_resolution" => json!({"resolutions": numbered(prompt, "item ")
            .into_iter().map(|i| json!({"id": i, "duplicate_of": -1})).collect::<Vec<_>>()}),
        "fact_resolution" => json!({"facts": numbered(prompt, "new fact ")
            .into_iter().map(|i| json!({"id": i, "duplicate_of": -1, "contradicts": []})).collect::<Vec<_>>()}),
        _ => json!({"summaries": numbered(prompt, "entity ")
            .into_iter().map(|i| json!({"id": i, "summary": "A member."})).collect::<Vec<_>>()}),
    }
}

/// The extraction of "Member 001 met Member 024 at Venue 01.".
fn extraction(episode: &str) -> Value {
    let words: Vec<&str> = episode.trim_end_matches('.').split(' ').collect();
    let (a, b, v) = (
        format!("{} {}", words[0], words[1]),
        format!("{} {}", words[3], words[4]),
        format!("{} {}", words[6], words[7]),
    );
    json!({
        "entities": [{"name": a, "type_id": 0}, {"name": b, "type_id": 0}, {"name": v, "type_id": 0}],
        "facts": [
            {"source": a, "target": b, "relation_type": "MET", "fact": format!("{a} met {b}."),
             "valid_at": null, "invalid_at": null},
            {"source": a, "target": v, "relation_type": "VISITED", "fact": format!("{a} visited {v}."),
             "valid_at": null, "invalid_at": null},
        ]
    })
}

/// CPU seconds (user + system) a process has used so far, from its `/proc` stat
/// (0 where there is none).
pub fn cpu_seconds(stat: &str) -> f64 {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    // The fields after the command name (which may hold spaces) close with ')'.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}
