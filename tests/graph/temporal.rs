//! Properties and scenarios of the temporal invalidation rules (`src/graph/temporal.rs`).
//! Mirrors `test-trees/graph-temporal.md`.

use gralkor::graph::temporal::{FactTimes, NewFactUpdate, resolve, resolve_edges, times_current};
use gralkor::graph::{EntityEdge, Timestamp, temporal::is_current};
use proptest::prelude::*;
use uuid::Uuid;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A small time range, so that ties and equal boundaries are common.
fn time() -> impl Strategy<Value = Option<Timestamp>> {
    prop::option::weighted(0.8, (0i64..40).prop_map(Timestamp))
}

fn times(n: u128) -> impl Strategy<Value = FactTimes> {
    (time(), time(), time()).prop_map(move |(valid_at, invalid_at, expired_at)| FactTimes {
        uuid: Uuid::from_u128(n),
        valid_at,
        invalid_at,
        expired_at,
    })
}

/// A new fact (uuid 0) and up to 8 existing facts (uuids 1..), each with a flag saying
/// whether the model marked it as contradicted.
fn scenario() -> impl Strategy<Value = (FactTimes, Vec<(FactTimes, bool)>)> {
    (
        times(0),
        (0usize..8).prop_flat_map(|n| {
            (1..=n as u128)
                .map(|i| (times(i), any::<bool>()))
                .collect::<Vec<_>>()
        }),
    )
}

fn edge(f: &FactTimes) -> EntityEdge {
    let mut e = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "fact");
    e.uuid = f.uuid;
    e.valid_at = f.valid_at;
    e.invalid_at = f.invalid_at;
    e.expired_at = f.expired_at;
    e
}

fn well_formed(f: &FactTimes) -> bool {
    !matches!((f.valid_at, f.invalid_at), (Some(v), Some(i)) if i < v)
}

proptest! {
    #[test]
    fn invalid_at_is_never_set_before_valid_at((new, pool) in scenario(), now in 0i64..100) {
        let marked: Vec<FactTimes> = pool.iter().filter(|(_, m)| *m).map(|(f, _)| *f).collect();
        let r = resolve(new, &marked, Timestamp(now));
        for inv in &r.invalidated {
            let old = marked.iter().find(|f| f.uuid == inv.uuid).unwrap();
            prop_assert!(old.valid_at.is_some_and(|v| v < inv.invalid_at));
        }
        match r.new_fact_update {
            Some(NewFactUpdate::Superseded { .. }) => {
                prop_assert!(matches!(
                    (r.new_fact.valid_at, r.new_fact.invalid_at),
                    (Some(v), Some(i)) if v < i
                ));
            }
            _ => prop_assert_eq!(r.new_fact.invalid_at, new.invalid_at),
        }
        if well_formed(&new) && marked.iter().all(well_formed) {
            prop_assert!(well_formed(&r.new_fact));
            for inv in &r.invalidated {
                let old = marked.iter().find(|f| f.uuid == inv.uuid).unwrap();
                let updated = FactTimes { invalid_at: Some(inv.invalid_at), ..*old };
                prop_assert!(well_formed(&updated));
            }
        }
    }

    #[test]
    fn resolving_twice_changes_nothing(
        (new, pool) in scenario(),
        now in 0i64..100,
        later in 0i64..100,
    ) {
        let marked: Vec<EntityEdge> = pool.iter().filter(|(_, m)| *m).map(|(f, _)| edge(f)).collect();
        let mut new_edge = edge(&new);
        let mut existing = marked.clone();
        let first = resolve_edges(&new_edge, &marked, Timestamp(now));
        first.apply(&mut new_edge, &mut existing);
        prop_assert_eq!(FactTimes::from(&new_edge), first.new_fact);
        let second = resolve_edges(&new_edge, &existing, Timestamp(now + later));
        prop_assert!(second.is_empty(), "{:?}", second);
        prop_assert_eq!(second.new_fact, first.new_fact);
    }

    #[test]
    fn facts_not_marked_contradicted_are_never_touched((new, pool) in scenario(), now in 0i64..100) {
        let marked: Vec<EntityEdge> = pool.iter().filter(|(_, m)| *m).map(|(f, _)| edge(f)).collect();
        let mut all: Vec<EntityEdge> = pool.iter().map(|(f, _)| edge(f)).collect();
        let before = all.clone();
        let mut new_edge = edge(&new);
        let r = resolve_edges(&new_edge, &marked, Timestamp(now));
        for inv in &r.invalidated {
            prop_assert!(marked.iter().any(|m| m.uuid == inv.uuid));
        }
        prop_assert_eq!(r.apply(&mut new_edge, &mut all), r.invalidated.len());
        for ((f, m), (a, b)) in pool.iter().zip(all.iter().zip(&before)) {
            if !*m {
                prop_assert_eq!(a, b, "{:?}", f);
            }
        }
    }
}

fn alice(fact: &str, valid: &str) -> EntityEdge {
    let mut e = EntityEdge::new(Uuid::from_u128(1), Uuid::new_v4(), "WORKS_AT", fact);
    e.valid_at = Some(t(valid));
    e
}

#[test]
fn alice_acme_then_globex_ends_the_acme_fact() {
    let now = t("2026-11-30T12:00:00Z");
    let acme = alice("Alice works at Acme", "2024-01-15T00:00:00Z");
    let globex = alice("Alice left Acme and joined Globex", "2025-03-01T00:00:00Z");
    let r = resolve_edges(&globex, std::slice::from_ref(&acme), now);
    assert_eq!(r.new_fact_update, None);
    assert_eq!(r.new_fact, FactTimes::from(&globex));
    assert_eq!(r.invalidated.len(), 1);
    assert_eq!(r.invalidated[0].uuid, acme.uuid);
    assert_eq!(r.invalidated[0].invalid_at, t("2025-03-01T00:00:00Z"));
    assert_eq!(r.invalidated[0].expired_at, now);
    let (mut new, mut existing) = (globex.clone(), [acme.clone()]);
    assert_eq!(r.apply(&mut new, &mut existing), 1);
    assert!(is_current(&existing[0], t("2025-02-28T00:00:00Z")));
    assert!(!is_current(&existing[0], t("2025-03-01T00:00:00Z")));
    assert!(is_current(&new, now));
}

#[test]
fn alice_globex_then_acme_ends_the_acme_fact() {
    let now = t("2026-11-30T12:00:00Z");
    let globex = alice("Alice left Acme and joined Globex", "2025-03-01T00:00:00Z");
    let acme = alice("Alice works at Acme", "2024-01-15T00:00:00Z");
    let r = resolve_edges(&acme, std::slice::from_ref(&globex), now);
    assert_eq!(
        r.new_fact_update,
        Some(NewFactUpdate::Superseded { by: globex.uuid })
    );
    assert_eq!(r.new_fact.invalid_at, Some(t("2025-03-01T00:00:00Z")));
    assert_eq!(r.new_fact.expired_at, Some(now));
    assert!(r.invalidated.is_empty(), "the Globex fact is untouched");
    let (mut new, mut existing) = (acme.clone(), [globex.clone()]);
    assert_eq!(r.apply(&mut new, &mut existing), 0);
    assert_eq!(existing[0], globex);
    assert!(is_current(&new, t("2024-06-01T00:00:00Z")));
    assert!(!is_current(&new, t("2025-03-01T00:00:00Z")));
    assert!(times_current(&FactTimes::from(&globex), now));
}

#[test]
fn both_orders_give_the_acme_fact_the_same_world_span() {
    let now = t("2026-11-30T12:00:00Z");
    let acme = alice("Alice works at Acme", "2024-01-15T00:00:00Z");
    let globex = alice("Alice left Acme and joined Globex", "2025-03-01T00:00:00Z");
    let in_order = resolve_edges(&globex, std::slice::from_ref(&acme), now);
    let out_of_order = resolve_edges(&acme, std::slice::from_ref(&globex), now);
    assert_eq!(
        in_order.invalidated[0].invalid_at,
        out_of_order.new_fact.invalid_at.unwrap()
    );
    assert_eq!(
        in_order.invalidated[0].expired_at,
        out_of_order.new_fact.expired_at.unwrap()
    );
}
