//! What a value sent to the database may be: the rules the FalkorDB adapter's
//! parameter encoder enforces on every value, and that a replace-graph payload is
//! checked against before anything is removed. Each rule is written here once; both
//! name the offending field themselves.

/// Why a text cannot be stored, if it cannot: the server reads a query as a C
/// string, so a NUL character would cut it short.
pub fn text_rule(text: &str) -> Option<&'static str> {
    text.contains('\0')
        .then_some("must not contain a NUL character")
}

/// The rule a NaN or infinite number breaks.
pub const NOT_FINITE: &str = "must be a finite number (NaN and infinity cannot be stored)";

/// Why a number cannot be stored, if it cannot: NaN and infinities have no literal,
/// and FalkorDB's parser rejects subnormal numbers as "Float overflow".
pub fn float_rule(f: f64) -> Option<&'static str> {
    if !f.is_finite() {
        return Some(NOT_FINITE);
    }
    (f != 0.0 && !f.is_normal()).then_some(
        "must not be a subnormal number (smaller in magnitude than 2.2250738585072014e-308): \
         FalkorDB's parser rejects it",
    )
}

/// Whether `name` may be a label, relationship type or property key: a plain Cypher
/// identifier, `[A-Za-z_][A-Za-z0-9_]*`. The adapter refuses anything else before it
/// reaches Cypher; the domain (ontologies, Lenses, Reflections, filters) checks names
/// with it.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_with_nul_and_numbers_without_a_literal_are_refused() {
        assert_eq!(text_rule("it's fine\n😀"), None);
        assert!(text_rule("a\0b").unwrap().contains("NUL"));
        for ok in [0.0, -0.0, 1.5, f64::MAX, f64::MIN_POSITIVE, -1e300] {
            assert_eq!(float_rule(ok), None, "{ok}");
        }
        assert_eq!(float_rule(f64::NAN), Some(NOT_FINITE));
        assert_eq!(float_rule(f64::NEG_INFINITY), Some(NOT_FINITE));
        assert!(float_rule(5e-324).unwrap().contains("subnormal"));
    }
}
