//! Text normalisation shared by the scorers, and the token estimate.

/// Lower case, every run of characters that are not letters or digits as one space,
/// trimmed: `"  Ada's  Café!"` → `"ada s café"`. Names, relations and answers are
/// compared under it.
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

/// A relation type as `UPPER_SNAKE_CASE` words: `works at`, `worksAt` and `WORKS_AT`
/// all become `works at` under [`normalise`] after splitting camel case.
pub fn normalise_relation(relation: &str) -> String {
    let mut spaced = String::with_capacity(relation.len() + 4);
    let mut prev_lower = false;
    for c in relation.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        spaced.push(c);
    }
    normalise(&spaced)
}

/// Whether `phrase` (normalised) occurs in `text` (normalised) on word boundaries.
pub fn contains_phrase(text: &str, phrase: &str) -> bool {
    let (t, p) = (normalise(text), normalise(phrase));
    if p.is_empty() {
        return false;
    }
    format!(" {t} ").contains(&format!(" {p} "))
}

/// A token estimate: one token per four bytes, rounded up (the library's own budget
/// estimate; providers' tokenizers differ by a few per cent on English text).
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The `q`-quantile (0–1) of `values` by the nearest-rank rule (sorted copy; 0 for
/// none).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_folds_case_punctuation_and_camel_case() {
        assert_eq!(normalise("  Ada's  Café!"), "ada s café");
        assert_eq!(normalise_relation("worksAt"), "works at");
        assert_eq!(normalise_relation("WORKS_AT"), "works at");
        assert_eq!(normalise_relation("works at"), "works at");
        assert!(contains_phrase("She moved to Lisbon, Portugal.", "lisbon"));
        assert!(!contains_phrase("Lisbonne", "lisbon"));
        assert!(!contains_phrase("anything", "  "));
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 0.95), 5.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
