//! The statement guard: Cypher shapes that FalkorDB 4.16 cannot run safely are refused
//! before they are sent, whatever their values.
//!
//! FalkorDB 4.16.3 crashes (SIGSEGV in `Index_BuildQueryTree` → `QueryNode_AddChildren`)
//! when a filter that its optimiser turns into an index *set* lookup meets a string the
//! label's fulltext stopwords remove: `MATCH (n:L) WHERE n.k IN ['a']` on a label with a
//! range index on `k` and a fulltext index created with a stopword list. Measured on a
//! real server (one fresh server per probe, stopwords `a the no not this`):
//!
//! | form                                          | `'a'`, `'the'`, `'this'` |
//! |-----------------------------------------------|--------------------------|
//! | `WHERE n.k IN $list`, `WHERE n.k IN [$v]`     | crash                    |
//! | `WHERE n.k = $a OR n.k = $b`                  | crash (rewritten to `IN`) |
//! | `MATCH … WITH n WHERE n.k IN $list`           | crash (the filter moves up) |
//! | `WHERE n.k = $v`, `MATCH (n:L {k: $v})`, `MERGE (n:L {k: $v})` | fine     |
//! | `UNWIND $list AS k MATCH (n:L {k: k})`        | fine                     |
//! | `WHERE (n.k) IN $list`                        | crash (parentheses change nothing) |
//! | `WHERE NOT n.k IN $list`                      | fine (never an index lookup) |
//! | `WHERE toString(n.k) IN $list`                | fine (a function result has no index) |
//! | `WHERE any(x IN $list WHERE x = n.k)`         | no crash, but wrongly false after a `WITH` |
//!
//! The crash depends on the value, not on the statement, so no amount of value checking
//! makes an `IN` on a property safe: a stopword is a perfectly good entity name (`Will`,
//! `IT`, `This`). Instead [`check`] refuses the two shapes themselves, in every statement
//! any [`FalkorDb`](super::FalkorDb) handle sends:
//!
//! 1. a property access directly before the keyword `IN` (`n.k IN …`, ``n.`k` IN …``,
//!    `row.a.b IN …`), unless the keyword `NOT` stands directly before the property;
//! 2. `OR` between two equality comparisons of the same property (`n.k = $a OR n.k = $b`,
//!    parentheses around either side included).
//!
//! A list membership is written instead as one equality per element
//! (`UNWIND $keys AS key MATCH (n:Entity {name_key: key})`, which the index answers per
//! key) or, where no index lookup is wanted, as `toString(n.k) IN $list` for a string
//! property. (`any(x IN $list WHERE x = n.k)` does not crash, but FalkorDB 4.16.3
//! evaluates it wrongly — false for every row — in a `WITH … WHERE`.)
//!
//! String literals, backquoted names and comments are skipped, so their text never
//! trips the guard.

use crate::{Error, Result};

/// The rule a refused statement breaks, as the error states it.
const IN_RULE: &str = "must not test a property with `IN` (`n.k IN list`): FalkorDB 4.16 crashes \
     on it when the list holds one of the label's fulltext stopwords; write one equality per \
     element (`UNWIND $list AS k MATCH (n {k: k})`) or `toString(n.k) IN list`";

const OR_RULE: &str = "must not compare one property for equality on both sides of `OR` \
     (`n.k = $a OR n.k = $b`): FalkorDB 4.16 turns it into an `IN` lookup, which crashes on \
     stopwords; write `toString(n.k) IN [$a, $b]`";

/// Refuses a statement whose shape FalkorDB 4.16 may crash on (see the
/// [module documentation](self)); `field` names the statement in the error.
pub(crate) fn check(text: &str, field: &str) -> Result<()> {
    // The same statement texts come back on every call (an ingest sends the same few
    // dozen), so the texts that passed are remembered: a hash lookup instead of
    // tokenising kilobytes of Cypher each time. The verdict depends on the text alone.
    if passed()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(text)
    {
        return Ok(());
    }
    check_tokens(text, field)?;
    let mut passed = passed().lock().unwrap_or_else(|p| p.into_inner());
    if passed.len() >= MAX_REMEMBERED {
        passed.clear();
    }
    passed.insert(text.to_owned());
    Ok(())
}

/// How many passing statement texts [`check`] remembers before it starts afresh.
const MAX_REMEMBERED: usize = 4096;

fn passed() -> &'static std::sync::Mutex<std::collections::HashSet<String>> {
    static PASSED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    PASSED.get_or_init(Default::default)
}

fn check_tokens(text: &str, field: &str) -> Result<()> {
    let tokens = tokens(text);
    for (i, t) in tokens.iter().enumerate() {
        if t.is_keyword("IN")
            && let Some(start) = bare_property_before(&tokens, i)
            && !(start > 0 && tokens[start - 1].is_keyword("NOT"))
        {
            return Err(Error::invalid(field, IN_RULE));
        }
        if t.is_keyword("OR")
            && let (Some(left), Some(right)) =
                (equality_before(&tokens, i), equality_after(&tokens, i))
            && left == right
        {
            return Err(Error::invalid(field, OR_RULE));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A name: a keyword, variable, property or function name (backquotes removed).
    Word(String),
    /// A `$parameter`.
    Param(String),
    /// A string or number literal (its text does not matter here).
    Literal,
    /// Any other character.
    Punct(char),
}

impl Token {
    fn is_keyword(&self, kw: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    fn is(&self, c: char) -> bool {
        matches!(self, Token::Punct(p) if *p == c)
    }
}

/// Splits Cypher text into the tokens the checks look at.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            '\'' | '"' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push(Token::Literal);
            }
            '`' => {
                let start = i + 1;
                i = start;
                while i < chars.len() && chars[i] != '`' {
                    i += 1;
                }
                out.push(Token::Word(
                    chars[start..i.min(chars.len())].iter().collect(),
                ));
                i += 1;
            }
            '$' => {
                let start = i + 1;
                i = start;
                while i < chars.len() && is_name_char(chars[i]) {
                    i += 1;
                }
                out.push(Token::Param(chars[start..i].iter().collect()));
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && (is_name_char(chars[i]) || chars[i] == '.') {
                    // `1.5` is one literal, but `1..3` (a range) is not.
                    if chars[i] == '.' && chars.get(i + 1) == Some(&'.') {
                        break;
                    }
                    i += 1;
                }
                out.push(Token::Literal);
            }
            c if is_name_char(c) => {
                let start = i;
                while i < chars.len() && is_name_char(chars[i]) {
                    i += 1;
                }
                out.push(Token::Word(chars[start..i].iter().collect()));
            }
            c => {
                out.push(Token::Punct(c));
                i += 1;
            }
        }
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// When the tokens just before `end` are a property access (`a.b`, `a.b.c`), the index
/// of its first token.
fn property_before(tokens: &[Token], end: usize) -> Option<usize> {
    let mut i = end.checked_sub(1)?;
    if !matches!(tokens[i], Token::Word(_)) || i == 0 || !tokens[i - 1].is('.') {
        return None;
    }
    // Walk back over `.name` pairs to the chain's root.
    while i >= 2 && tokens[i - 1].is('.') && matches!(tokens[i - 2], Token::Word(_)) {
        i -= 2;
    }
    Some(i)
}

/// Keywords that may stand before a parenthesis that only groups (`WHERE (n.k) IN`),
/// as opposed to a function name before its arguments (`toString(n.k) IN`).
const GROUPING_KEYWORDS: &[&str] = &[
    "WHERE", "AND", "OR", "XOR", "NOT", "WHEN", "THEN", "ELSE", "RETURN", "WITH", "IN", "CASE",
    "AS", "SET", "DISTINCT",
];

/// Like [`property_before`], but also sees through grouping parentheses:
/// `(n.k) IN` and `((n.k)) IN` are `n.k IN` to FalkorDB's planner. A property inside a
/// function call (`toString(n.k) IN`) is not a bare property: no index answers it.
fn bare_property_before(tokens: &[Token], end: usize) -> Option<usize> {
    let mut end = end;
    let mut groups = 0usize;
    while end > 0 && tokens[end - 1].is(')') {
        end -= 1;
        groups += 1;
    }
    let start = property_before(tokens, end)?;
    let mut open = start;
    for _ in 0..groups {
        if open == 0 || !tokens[open - 1].is('(') {
            return None;
        }
        open -= 1;
        let called = open > 0
            && matches!(&tokens[open - 1], Token::Word(w)
                if !GROUPING_KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)));
        if called {
            return None;
        }
    }
    Some(if groups == 0 { start } else { open })
}

/// The property of a property access starting at `start` (`a.b`), and the index after it.
fn property_at(tokens: &[Token], start: usize) -> Option<(String, usize)> {
    let Token::Word(root) = tokens.get(start)? else {
        return None;
    };
    let mut name = root.clone();
    let mut i = start + 1;
    while tokens.get(i).is_some_and(|t| t.is('.')) {
        let Some(Token::Word(part)) = tokens.get(i + 1) else {
            break;
        };
        name.push('.');
        name.push_str(part);
        i += 2;
    }
    name.contains('.').then_some((name, i))
}

/// Whether `t` can stand on the other side of a property equality.
fn is_operand(t: &Token) -> bool {
    matches!(t, Token::Param(_) | Token::Literal | Token::Word(_))
}

/// The property compared for equality right before the `OR` at `or`
/// (`… n.k = $v) OR`), if any.
fn equality_before(tokens: &[Token], or: usize) -> Option<String> {
    let mut end = or;
    while end > 0 && tokens[end - 1].is(')') {
        end -= 1;
    }
    // `n.k = operand`
    if end >= 2
        && is_operand(&tokens[end - 1])
        && tokens[end - 2].is('=')
        && let Some(start) = property_before(tokens, end - 2)
    {
        return property_at(tokens, start).map(|(p, _)| p);
    }
    // `operand = n.k`
    let start = property_before(tokens, end)?;
    if start >= 2 && tokens[start - 1].is('=') && is_operand(&tokens[start - 2]) {
        return property_at(tokens, start).map(|(p, _)| p);
    }
    None
}

/// The property compared for equality right after the `OR` at `or`
/// (`OR (n.k = $v …`), if any.
fn equality_after(tokens: &[Token], or: usize) -> Option<String> {
    let mut start = or + 1;
    while tokens.get(start).is_some_and(|t| t.is('(')) {
        start += 1;
    }
    // `n.k = operand`
    if let Some((p, next)) = property_at(tokens, start)
        && tokens.get(next).is_some_and(|t| t.is('='))
        && tokens.get(next + 1).is_some_and(is_operand)
    {
        return Some(p);
    }
    // `operand = n.k`
    if tokens.get(start).is_some_and(is_operand) && tokens.get(start + 1).is_some_and(|t| t.is('='))
    {
        return property_at(tokens, start + 2).map(|(p, _)| p);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::check;

    fn refused(q: &str) -> bool {
        check(q, "query").is_err()
    }

    #[test]
    fn a_verdict_is_the_same_every_time_a_text_is_checked() {
        let bad = "MATCH (n:L) WHERE n.k IN $remembered RETURN n";
        let good = "MATCH (n:L) WHERE NOT n.k IN $remembered RETURN n";
        for _ in 0..3 {
            assert!(refused(bad));
            assert!(!refused(good));
        }
    }

    #[test]
    fn a_property_before_in_is_refused() {
        for q in [
            "MATCH (n:L) WHERE n.k IN $v RETURN n",
            "MATCH (n:L) WHERE n.k IN [$v] RETURN n",
            "match (n:L) where n.k in $v return n",
            "MATCH (n:L) WHERE n.`k` IN $v RETURN n",
            "MATCH (n:L) WITH n WHERE n.k IN $v RETURN n",
            "UNWIND $rows AS r MATCH (n) WHERE n.uuid IN r.ends RETURN n",
            "MATCH (n) WHERE NOT (n.a IN $v AND m.b IN $v) RETURN n",
            "MATCH (n) WHERE x = 1 OR n.row.k IN $v RETURN n",
            "MATCH (n:L) WHERE (n.k) IN $v RETURN n",
            "MATCH (n:L) WHERE ((n.k)) IN $v RETURN n",
            "MATCH (n:L) WHERE x AND (n.k) IN $v RETURN n",
        ] {
            assert!(refused(q), "{q}");
        }
    }

    #[test]
    fn membership_forms_that_never_use_an_index_set_pass() {
        for q in [
            "MATCH (n:L) WHERE NOT n.k IN $v RETURN n",
            "MATCH (n:L) WHERE toString(n.k) IN $v RETURN n",
            "MATCH (n:L) WHERE toLower(trim(n.k)) IN $v RETURN n",
            "MATCH (n:L) WHERE any(x IN $v WHERE x = n.k) RETURN n",
            "UNWIND $v AS k MATCH (n:L {k: k}) RETURN n",
            "MATCH (n) WHERE any(l IN labels(n) WHERE l IN $labels) RETURN n",
            "FOREACH (r IN $rows | MERGE (n:E {uuid: r.uuid}))",
            "RETURN [e IN n.episodes WHERE e <> $u] AS xs",
            "MATCH (n) WHERE $p IN n.tags RETURN n",
            "MATCH (n) WHERE n.name = 'x.k IN y' RETURN n",
            "MATCH (n) WHERE n.name = \"a.b IN c\" // a.b IN c\nRETURN n",
            "MATCH (n) /* n.k IN $v */ RETURN n",
        ] {
            assert!(!refused(q), "{q}");
        }
    }

    #[test]
    fn or_of_equalities_on_one_property_is_refused() {
        for q in [
            "MATCH (n:L) WHERE n.k = $a OR n.k = $b RETURN n",
            "MATCH (n:L) WHERE (n.k = $a) OR (n.k = 'b') RETURN n",
            "MATCH (n:L) WHERE $a = n.k OR n.k = $b RETURN n",
            "MATCH (n:L) WHERE n.k = $a OR $b = n.k RETURN n",
        ] {
            assert!(refused(q), "{q}");
        }
        for q in [
            "MATCH (n:L) WHERE n.k = $a OR n.j = $b RETURN n",
            "MATCH (n:L) WHERE n.k = $a OR m.k = $b RETURN n",
            "MATCH (n:L) WHERE n.k >= $a OR n.k <= $b RETURN n",
            "MATCH ()-[f]->() WHERE any(x IN $v WHERE x = f.source_uuid OR x = f.target_uuid) RETURN f",
        ] {
            assert!(!refused(q), "{q}");
        }
    }

    #[test]
    fn the_error_names_the_field_and_the_rule() {
        let e = check("MATCH (n) WHERE n.k IN $v RETURN n", "statements[3].query").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("statements[3].query"), "{text}");
        assert!(text.contains("IN"), "{text}");
        assert!(!e.is_retryable());
    }
}
