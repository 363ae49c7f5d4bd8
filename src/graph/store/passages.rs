//! Episode passages: a long episode embedded in parts, so that the vector search finds
//! it by any part of it, not only by its opening.
//!
//! An embedder reads a bounded prefix of its input (the in-process MiniLM the first
//! 256 word pieces, about 1,000 characters of English), so one vector of a
//! 4,000-character conversation session sees its first quarter. [`episode_passages`]
//! splits the content between lines into passages of at most [`PASSAGE_CHARS`]
//! characters (a longer line is split between words), at most [`MAX_PASSAGES`] of
//! them; each is embedded.
//!
//! Passage 0's vector is the episode's embedding node as before,
//! `(:EpisodeEmbedding {uuid})` written with the episode; passages 1… are
//! `(:EpisodeEmbedding {uuid, part})` nodes of the same label and the same uuid,
//! written by [`write_passages`] (`MERGE … ON CREATE SET`, never updated, so they leave
//! no stale index entry), in the same vector index. So the searches that read the
//! index find an episode through any of its passages (its score the best passage's),
//! and removing the episode removes every node with its uuid.

use crate::Result;
use crate::falkordb::{FalkorDb, Params, Value};

/// The most characters of a passage: about 175 word pieces of English, within the
/// 256 the in-process embedder reads.
pub const PASSAGE_CHARS: usize = 700;
/// The most passages of an episode (the rest of a longer content is not embedded; it
/// stays searchable by fulltext).
pub const MAX_PASSAGES: usize = 24;

/// `content` split into passages (see the module documentation): whole lines
/// packed in order up to [`PASSAGE_CHARS`] characters, a longer line split between
/// words (or, without spaces, at a character boundary); at most [`MAX_PASSAGES`].
/// Empty content has one empty passage, so every episode has passage 0.
///
/// ```
/// use gralkor::graph::store::{PASSAGE_CHARS, episode_passages};
///
/// let line = "Ada: ".to_owned() + &"tea ".repeat(100);
/// let content = [line.as_str(); 4].join("\n");
/// let parts = episode_passages(&content);
/// assert_eq!(parts.len(), 4);
/// assert!(parts.iter().all(|p| p.chars().count() <= PASSAGE_CHARS));
/// assert_eq!(episode_passages("short"), ["short"]);
/// ```
pub fn episode_passages(content: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut len = 0usize;
    let push = |piece: &str, out: &mut Vec<String>, current: &mut String, len: &mut usize| {
        let n = piece.chars().count();
        if *len > 0 && *len + 1 + n > PASSAGE_CHARS {
            out.push(std::mem::take(current));
            *len = 0;
        }
        if *len > 0 {
            current.push('\n');
            *len += 1;
        }
        current.push_str(piece);
        *len += n;
    };
    for line in content.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()) {
        for piece in split_long(line) {
            push(&piece, &mut out, &mut current, &mut len);
        }
    }
    if len > 0 || out.is_empty() {
        out.push(current);
    }
    out.truncate(MAX_PASSAGES);
    out
}

/// `line` in pieces of at most [`PASSAGE_CHARS`] characters, cut at the last space
/// that fits (else at the limit).
fn split_long(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while rest.chars().count() > PASSAGE_CHARS {
        let limit = rest
            .char_indices()
            .nth(PASSAGE_CHARS)
            .map_or(rest.len(), |(i, _)| i);
        let cut = rest[..limit]
            .rfind(' ')
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        out.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

/// Writes the vectors of passages 1… of episode `uuid` (`rest[0]` is passage 1;
/// passage 0 is written with the episode): one `EpisodeEmbedding` node per passage
/// unless it exists. Writing the same passages again creates nothing; no round trip
/// for none.
pub(crate) async fn write_passages(
    db: &FalkorDb,
    graph: &str,
    uuid: uuid::Uuid,
    rest: &[Vec<f32>],
) -> Result<()> {
    if rest.is_empty() {
        return Ok(());
    }
    let rest: Vec<Value> = rest
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Value::Map(
                [
                    ("part".to_owned(), Value::Int(i as i64 + 1)),
                    ("v".to_owned(), Value::Vector(v.clone())),
                ]
                .into_iter()
                .collect(),
            )
        })
        .collect();
    db.query(
        graph,
        &format!(
            "UNWIND $parts AS p \
             MERGE (x:{label} {{uuid: $uuid, part: p.part}}) \
             ON CREATE SET x.embedding = vecf32(p.v)",
            label = super::EPISODE_EMBEDDING_LABEL
        ),
        &Params::new()
            .set("uuid", uuid.to_string())
            .set("parts", Value::List(rest)),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passages_pack_whole_lines_and_split_only_overlong_ones() {
        let a = "A: ".to_owned() + &"x".repeat(300);
        let b = "B: ".to_owned() + &"y".repeat(300);
        let c = "C: ".to_owned() + &"z".repeat(300);
        // Two lines fit one passage (607 characters), the third opens the next.
        let parts = episode_passages(&format!("{a}\n{b}\n\n{c}\n"));
        assert_eq!(parts, [format!("{a}\n{b}"), c.clone()]);
        // A line of 1,000 words is split between words, nothing lost.
        let long = "word ".repeat(1_000);
        let parts = episode_passages(&long);
        assert!(parts.len() >= 7 && parts.len() <= 9, "{}", parts.len());
        assert!(parts.iter().all(|p| p.chars().count() <= PASSAGE_CHARS));
        assert_eq!(parts.join(" ").split_whitespace().count(), 1_000);
        // No spaces: cut at the limit, on a character boundary.
        let parts = episode_passages(&"é".repeat(1_500));
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            [700, 700, 100]
        );
        // Bounded, and never none.
        assert_eq!(episode_passages(&"w ".repeat(100_000)).len(), MAX_PASSAGES);
        assert_eq!(episode_passages(""), [""]);
    }
}
