//! Properties of the deterministic entity-resolution pass (`src/graph/dedup.rs`). Mirrors
//! `test-trees/graph-dedup.md`.

use std::collections::BTreeSet;

use gralkor::graph::dedup::{
    Candidate, FUZZY_JACCARD_THRESHOLD, Match, estimate_jaccard, is_low_information, jaccard,
    minhash, normalize_name, resolve, shingles,
};
use proptest::prelude::*;

fn names(ns: &[&str]) -> Vec<Candidate> {
    ns.iter().map(|n| Candidate::new(*n)).collect()
}

/// Names made of words, spaces, tabs and edge punctuation, with mixed case.
fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ \\t]{0,2}[A-Za-z\"(.]{0,2}[A-Za-zÉéß0-9]{1,8}( {1,3}[A-Za-z0-9&'-]{1,8}){0,3}[.,)!]{0,2}[ \\n]{0,2}",
        "\\PC{0,24}",
    ]
}

fn shingle_set() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set("[a-f]{3}", 0..60)
}

proptest! {
    #[test]
    fn normalisation_is_idempotent(name in name_strategy()) {
        let once = normalize_name(&name);
        prop_assert_eq!(normalize_name(&once), once.clone());
        prop_assert_eq!(once.trim(), once.as_str());
        prop_assert!(!once.contains("  "));
    }

    #[test]
    fn a_name_resolves_exact_to_itself(name in name_strategy(), others in prop::collection::vec("[A-Z][a-z]{2,10} [A-Z][a-z]{2,10}", 0..4)) {
        let r = resolve(&[Candidate::new(name.clone())], &[Candidate::new(name.clone())]);
        prop_assert_eq!(&r.matches, &[Match::Exact(0)]);
        // Among other names, it still finds itself unless another normalises equal.
        let mut existing = names(&others.iter().map(String::as_str).collect::<Vec<_>>());
        existing.push(Candidate::new(name.clone()));
        let me = existing.len() - 1;
        let twins: Vec<usize> = (0..existing.len())
            .filter(|&i| normalize_name(&existing[i].name) == normalize_name(&name))
            .collect();
        let r = resolve(&[Candidate::new(name)], &existing);
        if twins.len() == 1 {
            prop_assert_eq!(&r.matches, &[Match::Exact(me)]);
        } else {
            prop_assert_eq!(&r.matches, &[Match::Ambiguous(twins)]);
        }
    }

    #[test]
    fn jaccard_is_symmetric_and_bounded(a in shingle_set(), b in shingle_set()) {
        let ab = jaccard(&a, &b);
        prop_assert_eq!(ab, jaccard(&b, &a));
        prop_assert!((0.0..=1.0).contains(&ab));
        prop_assert_eq!(jaccard(&a, &a), 1.0);
    }

    #[test]
    fn name_jaccard_is_symmetric_and_bounded(a in name_strategy(), b in name_strategy()) {
        let (sa, sb) = (shingles(&a), shingles(&b));
        let j = jaccard(&sa, &sb);
        prop_assert_eq!(j, jaccard(&sb, &sa));
        prop_assert!((0.0..=1.0).contains(&j));
    }

    #[test]
    fn minhash_estimates_jaccard(common in shingle_set(), only_a in shingle_set(), only_b in shingle_set()) {
        let a: BTreeSet<String> = common.union(&only_a).cloned().collect();
        let b: BTreeSet<String> = common.union(&only_b).cloned().collect();
        prop_assume!(!a.is_empty() && !b.is_empty());
        // 256 functions: standard deviation ≤ 0.032; 0.16 is five of them.
        let est = estimate_jaccard(&minhash(&a, 256), &minhash(&b, 256));
        let exact = jaccard(&a, &b);
        prop_assert!((est - exact).abs() <= 0.16, "estimate {est}, exact {exact}");
    }

    #[test]
    fn resolution_is_deterministic_and_in_input_order(
        extracted in prop::collection::vec(name_strategy(), 0..8),
        existing in prop::collection::vec(name_strategy(), 0..8),
    ) {
        let ex: Vec<Candidate> = extracted.iter().cloned().map(Candidate::new).collect();
        let st: Vec<Candidate> = existing.iter().cloned().map(Candidate::new).collect();
        let r = resolve(&ex, &st);
        prop_assert_eq!(&r, &resolve(&ex, &st));
        prop_assert_eq!(r.matches.len(), ex.len());
        for (i, m) in r.matches.iter().enumerate() {
            match m {
                Match::SameAs(j) => {
                    prop_assert!(j < &i);
                    prop_assert_eq!(normalize_name(&ex[*j].name), normalize_name(&ex[i].name));
                    prop_assert!(!matches!(r.matches[*j], Match::SameAs(_)));
                }
                Match::Ambiguous(ix) => {
                    prop_assert!(!ix.is_empty());
                    prop_assert!(ix.windows(2).all(|w| w[0] < w[1]));
                    prop_assert!(ix.iter().all(|&k| k < st.len()));
                }
                Match::Exact(k) => {
                    prop_assert_eq!(normalize_name(&st[*k].name), normalize_name(&ex[i].name));
                }
                Match::Fuzzy(k, j) => {
                    prop_assert!(*j >= FUZZY_JACCARD_THRESHOLD);
                    prop_assert!(!is_low_information(&ex[i].name));
                    prop_assert!(!is_low_information(&st[*k].name));
                }
                Match::New => {}
            }
        }
    }

    #[test]
    fn inner_punctuation_and_spacing_variants_merge_fuzzily(
        words in prop::collection::vec("[a-z]{3,8}", 2..5),
        sep in "[-/ ]{1,2}",
    ) {
        let stored = words.join(" ");
        let variant = words.join(&sep);
        prop_assume!(!is_low_information(&stored));
        prop_assume!(normalize_name(&stored) != normalize_name(&variant));
        let r = resolve(&names(&[&variant]), &names(&["Initech", &stored]));
        prop_assert_eq!(&r.matches, &[Match::Fuzzy(1, 1.0)]);
    }

    #[test]
    fn short_names_never_fuzzy_match(short in "[A-Za-z]{1,5}", existing in prop::collection::vec("[A-Za-z]{1,7}", 0..6)) {
        let st = names(&existing.iter().map(String::as_str).collect::<Vec<_>>());
        let r = resolve(&[Candidate::new(short)], &st);
        prop_assert!(!matches!(r.matches[0], Match::Fuzzy(..)));
    }
}

#[test]
fn dgia_four_times_with_different_casing_and_spacing_is_one_target() {
    let extracted = names(&["DGIA", " dgia", "Dgia  ", "dGiA."]);
    let r = resolve(&extracted, &[]);
    assert_eq!(r.matches[0], Match::New);
    assert!((1..4).all(|i| r.matches[i] == Match::SameAs(0)));
    let r = resolve(&extracted, &names(&["Acme Corp", "DGIA"]));
    assert!((0..4).all(|i| r.target(i) == &Match::Exact(1)));
}

#[test]
fn acme_corp_and_acme_corp_dot_are_exact() {
    assert_eq!(normalize_name("Acme Corp."), normalize_name("Acme Corp"));
    let r = resolve(&names(&["Acme Corp."]), &names(&["New York", "Acme Corp"]));
    assert_eq!(r.matches, [Match::Exact(1)]);
}

#[test]
fn new_york_city_is_not_merged_with_new_york() {
    let j = jaccard(&shingles("New York City"), &shingles("New York"));
    assert!(j < FUZZY_JACCARD_THRESHOLD, "{j}");
    let r = resolve(&names(&["New York City"]), &names(&["New York"]));
    assert_eq!(r.matches, [Match::New]);
}

#[test]
fn al_and_bo_never_fuzzy_match() {
    assert!(is_low_information("Al") && is_low_information("Bo"));
    let r = resolve(&names(&["Al", "Bo"]), &names(&["Al.", "Bob", "Alan"]));
    assert_eq!(
        r.matches,
        [Match::Exact(0), Match::Ambiguous(vec![0, 1, 2])]
    );
}

#[test]
fn output_order_follows_input_order() {
    let extracted = names(&["Initech", "DGIA", "Globex Industries", "dgia"]);
    let existing = names(&["Globex  Industries", "Initech"]);
    let r = resolve(&extracted, &existing);
    assert_eq!(
        r.matches,
        [
            Match::Exact(1),
            Match::Ambiguous(vec![0, 1]),
            Match::Exact(0),
            Match::SameAs(1)
        ]
    );
    assert_eq!(r, resolve(&extracted, &existing));
}
