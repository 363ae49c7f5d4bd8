//! The fulltext (RediSearch) query sanitiser.
//!
//! FalkorDB's fulltext procedures take a RediSearch query string, whose syntax gives
//! meaning to `-` (NOT), `|`, `@field:`, `%fuzzy%`, `*`, quotes, brackets, `~`, `\` and
//! more. Passing user text through unchanged breaks on ordinary input — a hyphenated
//! name, a UUID, a path, a lone underscore — with "Syntax error at offset N" (Graphiti
//! issues #1269, #1483, #1660, #1144, #1475, #1820). [`fulltext_query`] never passes
//! syntax through: it extracts the words and rebuilds a query that only ORs terms.

/// The stopwords gralkor's fulltext indices are created with (RediSearch's English
/// default list). Words in this list are not indexed and are dropped from queries.
pub const DEFAULT_STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// At most this many distinct terms are kept (the first ones in the text).
pub const MAX_FULLTEXT_TERMS: usize = 32;

/// Longest term kept, in bytes; longer "words" (hashes, base64 blobs) are dropped.
const MAX_TERM_BYTES: usize = 64;

/// Turns arbitrary text into a RediSearch query that matches any of its words, or
/// `None` when no searchable word is left (the search should then be skipped).
///
/// Words are runs of Unicode letters, digits and inner underscores (RediSearch indexes
/// `user_id` as one term; the underscore is escaped). Everything else separates words.
/// Words are lowercased, stopwords and duplicates dropped, and at most
/// [`MAX_FULLTEXT_TERMS`] kept.
///
/// ```
/// use gralkor::falkordb::{fulltext_query, DEFAULT_STOPWORDS};
///
/// assert_eq!(
///     fulltext_query("Who is 5f3e-a1b2? (the user_id)", DEFAULT_STOPWORDS).as_deref(),
///     Some("who | 5f3e | a1b2 | user\\_id")
/// );
/// assert_eq!(fulltext_query("the -- of", DEFAULT_STOPWORDS), None);
/// ```
pub fn fulltext_query(text: &str, stopwords: &[&str]) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    let push = |word: &str, terms: &mut Vec<String>| {
        let word = word.trim_matches('_');
        if word.is_empty() || word.len() > MAX_TERM_BYTES || terms.len() >= MAX_FULLTEXT_TERMS {
            return;
        }
        let lower = word.to_lowercase();
        if stopwords.iter().any(|s| s.eq_ignore_ascii_case(&lower)) {
            return;
        }
        let escaped = lower.replace('_', "\\_");
        if !terms.contains(&escaped) {
            terms.push(escaped);
        }
    };
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        let word_char = c.is_alphanumeric() || c == '_';
        match (word_char, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push(&text[s..i], &mut terms);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push(&text[s..], &mut terms);
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
        assert_eq!(q("a/b\\c|d").as_deref(), Some("b | c | d"));
        assert_eq!(
            q("`code` and 50% @user *star*").as_deref(),
            Some("code | 50 | user | star")
        );
        assert_eq!(q("_"), None);
        assert_eq!(q("__init__").as_deref(), Some("init"));
        assert_eq!(q("snake_case_name").as_deref(), Some("snake\\_case\\_name"));
        assert_eq!(
            q("\"quoted\" [x] {y} (z)").as_deref(),
            Some("quoted | x | y | z")
        );
        assert_eq!(q("😀🎉"), None);
        assert_eq!(q(""), None);
        assert_eq!(q("The AND"), None);
    }

    #[test]
    fn unicode_words_are_kept_and_lowercased() {
        assert_eq!(
            q("Ærøskøbing Café 東京").as_deref(),
            Some("ærøskøbing | café | 東京")
        );
    }

    #[test]
    fn long_text_is_capped_and_deduplicated() {
        let text = (0..500)
            .map(|i| format!("w{i} w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let out = q(&text).unwrap();
        assert_eq!(out.split(" | ").count(), MAX_FULLTEXT_TERMS);
        let blob = "x".repeat(1000);
        assert_eq!(q(&format!("{blob} keep")).as_deref(), Some("keep"));
    }
}
