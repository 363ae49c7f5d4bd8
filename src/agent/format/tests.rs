use super::*;
use crate::client::{FactRecord, FactSource, Hit, NodeRecord, SearchResult, SourceKind};
use uuid::Uuid;

fn source(stored: &str, kind: Option<SourceKind>) -> FactSource {
    FactSource::from_stored(Uuid::new_v4(), kind, stored)
}

fn fact(text: &str, sources: Vec<FactSource>) -> SearchResult {
    SearchResult {
        score: 1.0,
        destination: "global".into(),
        hit: Hit::Fact({
            let mut record = FactRecord::new(Uuid::new_v4(), text);
            record.sources = sources;
            record
        }),
    }
}

fn lens(text: &str, name: &str) -> SearchResult {
    fact(
        text,
        vec![source(&format!("d [lens: {name}]"), Some(SourceKind::Text))],
    )
}

#[test]
fn groups_come_in_first_appearance_order_and_facts_in_retrieval_order() {
    let results = [
        lens("j1", "jira"),
        fact("g1", vec![source("reflection:generalisations", None)]),
        lens("j2", "jira"),
        lens("c1", "chat"),
    ];
    assert_eq!(
        present_facts(&results, DEFAULT_MAX_BYTES).unwrap(),
        "Lens: jira\n- j1\n- j2\n\nReflection: generalisations\n- g1\n\nLens: chat\n- c1"
    );
}

#[test]
fn a_fact_appears_once_under_each_distinct_source() {
    let results = [fact(
        "shared",
        vec![
            source("a [lens: jira]", None),
            source("b [lens: jira]", None),
            source("reflection:jira", None),
            source("c [lens: chat]", None),
        ],
    )];
    assert_eq!(
        present_facts(&results, DEFAULT_MAX_BYTES).unwrap(),
        "Lens: jira\n- shared\n\nReflection: jira\n- shared\n\nLens: chat\n- shared"
    );
}

#[test]
fn direct_and_unattributed_sources_have_their_own_headings() {
    let direct = |kind| fact("f", vec![source("m [gralkor: direct]", kind)]);
    let h = |r: SearchResult| present_facts(&[r], DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(
        h(direct(Some(SourceKind::Message))),
        "Source: direct conversation\n- f"
    );
    assert_eq!(
        h(direct(Some(SourceKind::Text))),
        "Source: direct document\n- f"
    );
    assert_eq!(
        h(direct(Some(SourceKind::Json))),
        "Source: direct structured record\n- f"
    );
    assert_eq!(h(direct(None)), "Source: direct\n- f");
    assert_eq!(
        h(fact("f", vec![source("legacy text", None)])),
        "Source: unknown\n- f"
    );
    assert_eq!(h(fact("f", vec![])), "Source: unknown\n- f");
}

#[test]
fn no_facts_is_no_matching_facts_and_other_results_are_ignored() {
    assert_eq!(
        present_facts(&[], DEFAULT_MAX_BYTES).unwrap(),
        NO_MATCHING_FACTS
    );
    let node = SearchResult {
        score: 1.0,
        destination: "global".into(),
        hit: Hit::Node(NodeRecord::new(Uuid::nil(), "n")),
    };
    assert_eq!(
        present_facts(&[node], DEFAULT_MAX_BYTES).unwrap(),
        NO_MATCHING_FACTS
    );
}

#[test]
fn whole_facts_are_kept_greedily_and_the_notice_counts_input_facts() {
    let big = "x".repeat(300);
    let results = [
        lens("first", "a"),
        fact(
            &big,
            vec![source("d [lens: a]", None), source("d [lens: b]", None)],
        ),
        lens("third", "a"),
    ];
    let all = present_facts(&results, DEFAULT_MAX_BYTES).unwrap();
    // A budget just too small for everything drops the oversized fact only.
    let budget = envelope_bytes(&all) - 1;
    let text = present_facts(&results, budget).unwrap();
    assert_eq!(
        text,
        "Lens: a\n- first\n- third\n\nOmitted facts: 1 (response limit)."
    );
    assert!(envelope_bytes(&text) <= budget);
    // Exactly the size of everything keeps everything.
    assert_eq!(present_facts(&results, envelope_bytes(&all)).unwrap(), all);
}

#[test]
fn utf8_bytes_and_json_escaping_count_against_the_byte_budget() {
    let tricky = "Zoë said \"ünïcödé\" \\ ok\n".repeat(10);
    let results = [lens(&tricky, "a"), lens("plain", "a")];
    let all = present_facts(&results, DEFAULT_MAX_BYTES).unwrap();
    let exact = envelope_bytes(&all);
    assert!(exact > all.len(), "escaping and the envelope add bytes");
    assert_eq!(present_facts(&results, exact).unwrap(), all);
    let cut = present_facts(&results, exact - 1).unwrap();
    assert_eq!(
        cut,
        "Lens: a\n- plain\n\nOmitted facts: 1 (response limit)."
    );
    assert!(envelope_bytes(&cut) < exact);
}

#[test]
fn the_text_never_exceeds_the_character_limit() {
    let results: Vec<_> = (0..200)
        .map(|i| lens(&format!("{i:03} {}", "é".repeat(100)), "a"))
        .collect();
    let text = present_facts(&results, usize::MAX).unwrap();
    assert!(text.chars().count() <= MAX_TEXT_CHARS);
    let kept = text.lines().filter(|l| l.starts_with("- ")).count();
    assert!(kept > 100 && kept < 200, "{kept}");
    assert!(text.ends_with(&format!("Omitted facts: {} (response limit).", 200 - kept)));
    // Kept facts are the first ones, in order.
    assert!(text.contains("- 000 ") && text.contains(&format!("- {:03} ", kept - 1)));
}

#[test]
fn a_budget_too_small_for_the_notice_is_an_error_with_the_minimum() {
    let results = [lens("a fact that will not fit", "a")];
    let minimum = envelope_bytes("Omitted facts: 1 (response limit).");
    match present_facts(&results, minimum - 1) {
        Err(Error::BudgetTooSmall {
            max_bytes,
            minimum_bytes,
        }) => {
            assert_eq!((max_bytes, minimum_bytes), (minimum - 1, minimum));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        present_facts(&results, minimum).unwrap(),
        "Omitted facts: 1 (response limit)."
    );
    assert!(matches!(
        present_facts(&[], 5),
        Err(Error::BudgetTooSmall { .. })
    ));
    // Zero is just the smallest budget too small.
    assert!(matches!(
        present_facts(&results, 0),
        Err(Error::BudgetTooSmall { max_bytes: 0, minimum_bytes }) if minimum_bytes == minimum
    ));
    // When everything is shorter than the notice, everything is the minimum.
    let short = [lens("x", "a")];
    let everything = envelope_bytes("Lens: a\n- x");
    assert!(everything < minimum);
    assert!(matches!(
        present_facts(&short, everything - 1),
        Err(Error::BudgetTooSmall { minimum_bytes, .. }) if minimum_bytes == everything
    ));
    assert_eq!(present_facts(&short, everything).unwrap(), "Lens: a\n- x");
}

#[test]
fn timestamps_drop_fractions_and_write_utc_as_plus_zero() {
    let t: Timestamp = "2024-02-29T23:59:59.5+01:00".parse().unwrap();
    assert_eq!(format_timestamp(t), "2024-02-29T22:59:59+0");
    assert_eq!(
        format_timestamp(Timestamp::from_unix_micros(0)),
        "1970-01-01T00:00:00+0"
    );
}

#[test]
fn fact_lines_carry_times_then_sources_in_a_fixed_order() {
    let t = |s: &str| Some(s.parse::<Timestamp>().unwrap());
    let e1 = Uuid::nil();
    let mut record = FactRecord::new(Uuid::nil(), "Ada works at Acme.");
    record.created_at = t("2024-01-02T00:00:00Z");
    record.valid_at = t("2024-01-01T00:00:00Z");
    record.invalid_at = t("2024-06-01T00:00:00Z");
    record.expired_at = t("2024-06-02T00:00:00Z");
    record.sources = vec![
        FactSource::from_stored(e1, Some(SourceKind::Text), "hr [lens: hr]"),
        FactSource::from_stored(e1, None, "legacy"),
    ];
    assert_eq!(
        format_fact(&record),
        "- Ada works at Acme. (created 2024-01-02T00:00:00+0) (valid from 2024-01-01T00:00:00+0) \
         (invalid since 2024-06-01T00:00:00+0) (expired 2024-06-02T00:00:00+0) \
         (source: document — hr [lens: hr]; episode: 00000000-0000-0000-0000-000000000000) \
         (source: legacy; episode: 00000000-0000-0000-0000-000000000000)"
    );
    let bare = FactRecord::new(record.uuid, record.fact.clone());
    assert_eq!(format_fact(&bare), "- Ada works at Acme.");
    assert_eq!(format_facts(&[]), "");
}
