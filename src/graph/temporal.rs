//! The deterministic half of fact resolution: Graphiti's temporal invalidation rules.
//! Pure functions: no database, no model, no clock (the caller passes `now`).
//!
//! The model call of fact resolution decides *which* existing facts a new fact
//! contradicts; [`resolve`] decides *what that does to the dates*, exactly as Graphiti
//! 0.31.2 does in `utils/maintenance/edge_operations.py` (`resolve_extracted_edge`, then
//! `resolve_edge_contradictions`; reference §2 step 6, "Temporal rules"). Nothing is
//! mutated: the answer is a [`Resolution`] listing the possibly-updated new fact and one
//! [`Invalidation`] per existing fact that changes, which the commit step applies
//! ([`Resolution::apply`]).
//!
//! Every fact carries `valid_at` / `invalid_at` (true in the world from / until, a
//! half-open span) and `expired_at` (when gralkor retired it). The rules, in order, with
//! the same `now` for all of them:
//!
//! 1. **Ended on arrival** (Graphiti: "the new edge has `invalid_at` → `expired_at =
//!    now`"). A new fact that already has an `invalid_at` and no `expired_at` gets
//!    `expired_at = now`. An `expired_at` it already has is kept.
//! 2. **Superseded on arrival** — out-of-order ingestion (Graphiti: "otherwise, if a
//!    contradicted candidate's `valid_at` is later than the new edge's → new `invalid_at =
//!    cand.valid_at`, `expired_at = now`"). Only when the new fact is still unexpired
//!    after rule 1: among the contradicted facts whose `valid_at` is strictly later than
//!    the new fact's, the **earliest** such `valid_at` becomes the new fact's `invalid_at`
//!    (Graphiti sorts the candidates by `valid_at` and takes the first), and the new fact
//!    gets `expired_at = now`. "Alice works at Acme" (January 2024) ingested after "Alice
//!    left Acme and joined Globex" (March 2025) ends in March 2025.
//! 3. **Already over** (Graphiti: "skip if `cand.invalid_at <= new.valid_at`"). An
//!    existing fact that stopped being true at or before the new fact became true is
//!    left alone.
//! 4. **New fact ends first** (Graphiti: "skip if `new.invalid_at <= cand.valid_at`",
//!    using the new fact's `invalid_at` *after* rule 2). An existing fact that became true
//!    at or after the new fact stopped being true is left alone. It does **not**
//!    invalidate the new fact here: the reference says skip, and such a new fact already
//!    has an `invalid_at` (from the model, or from rule 2) and so is expired by rule 1 or
//!    rule 2.
//! 5. **Invalidate** (Graphiti: "else if `cand.valid_at < new.valid_at` →
//!    `cand.invalid_at = new.valid_at`, `cand.expired_at ||= now`"). An existing fact that
//!    became true strictly before the new one ends when the new one begins: its
//!    `invalid_at` becomes the new fact's `valid_at` — even if it already had a later
//!    `invalid_at`, which is thereby shortened — and its `expired_at` becomes `now` unless
//!    it already had one.
//! 6. **Missing dates and ties** (Graphiti: "missing dates → no invalidation"). Every
//!    comparison above needs both dates; with either unknown it is false, so a rule that
//!    needs it does not fire (a skip does not either, and neither does an
//!    invalidation). Equal `valid_at`s are neither earlier nor later: neither fact is
//!    invalidated and both stay current. Equal boundaries (`cand.invalid_at ==
//!    new.valid_at`, `new.invalid_at == cand.valid_at`) are skips, by rules 3 and 4.
//! 7. **Only contradicted facts** (Graphiti: "only LLM-flagged edges are touched"). The
//!    existing facts passed in are exactly the ones the model marked as contradicted;
//!    nothing else is read or changed.
//!
//! Where this module adds to Graphiti, deliberately:
//!
//! * **No silent mutation.** Graphiti assigns the fields on the Python objects; here the
//!   changes are returned and applied explicitly.
//! * **Self and repeats.** A contradicted fact with the new fact's own uuid is ignored,
//!   and a uuid listed twice is considered once (its first occurrence). In Graphiti the
//!   first is a no-op (equal `valid_at`s) and the second is skipped by rule 3 after the
//!   first mutation, so the results agree; here they are explicit.
//! * **Plans and deadlines are not invalidations**, and nothing here tries to tell them
//!   apart: that is the extraction model's job (its prompt gives future plans
//!   `valid_at` = the reference time and no `invalid_at`; see the reference §2 step 5).
//!   This module trusts the dates it is given.
//! * **No time zones.** Graphiti normalises with `ensure_utc` before comparing;
//!   a [`Timestamp`] is always UTC, so comparisons are plain integer comparisons.
//!
//! Applying a resolution and resolving again changes nothing (the rules are idempotent),
//! and every `invalid_at` this module sets is strictly later than the fact's `valid_at`.
//!
//! ```
//! use gralkor::graph::temporal::{is_current, resolve_edges};
//! use gralkor::graph::{EntityEdge, Timestamp};
//! use uuid::Uuid;
//!
//! let t = |s: &str| s.parse::<Timestamp>().unwrap();
//! let (alice, acme, globex) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
//! let mut works = EntityEdge::new(alice, acme, "WORKS_AT", "Alice works at Acme");
//! works.valid_at = Some(t("2024-01-15T00:00:00Z"));
//! let mut joined = EntityEdge::new(alice, globex, "WORKS_AT", "Alice left Acme and joined Globex");
//! joined.valid_at = Some(t("2025-03-01T00:00:00Z"));
//! let now = t("2026-11-30T12:00:00Z");
//!
//! // In order: the Globex fact arrives second and ends the Acme fact.
//! let r = resolve_edges(&joined, std::slice::from_ref(&works), now);
//! assert_eq!(r.invalidated.len(), 1);
//! assert_eq!(r.invalidated[0].invalid_at, t("2025-03-01T00:00:00Z"));
//! let mut existing = [works.clone()];
//! let mut new = joined.clone();
//! r.apply(&mut new, &mut existing);
//! assert!(is_current(&existing[0], t("2024-06-01T00:00:00Z")));
//! assert!(!is_current(&existing[0], t("2025-06-01T00:00:00Z")));
//!
//! // Out of order: the Acme fact arrives second and is ended by the Globex fact.
//! let r = resolve_edges(&works, std::slice::from_ref(&joined), now);
//! assert!(r.invalidated.is_empty());
//! assert_eq!(r.new_fact.invalid_at, Some(t("2025-03-01T00:00:00Z")));
//! assert_eq!(r.new_fact.expired_at, Some(now));
//! ```

use std::collections::HashSet;

use uuid::Uuid;

use super::model::{EntityEdge, Timestamp};
pub use crate::vocab::FactTimes;
internal_use!(crate::vocab::times_current);

impl From<&EntityEdge> for FactTimes {
    fn from(e: &EntityEdge) -> FactTimes {
        FactTimes {
            uuid: e.uuid,
            valid_at: e.valid_at,
            invalid_at: e.invalid_at,
            expired_at: e.expired_at,
        }
    }
}

/// Why the new fact's dates changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewFactUpdate {
    /// Rule 1: it arrived with an `invalid_at` and is expired now.
    Ended,
    /// Rule 2: a contradicting fact became true after it did; `by` is that fact, whose
    /// `valid_at` is now the new fact's `invalid_at`.
    Superseded {
        /// The contradicting fact that ends it.
        by: Uuid,
    },
}

/// An existing fact ended by the new one (rule 5): the values to write on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalidation {
    /// The existing fact.
    pub uuid: Uuid,
    /// Its new `invalid_at`: the new fact's `valid_at`.
    pub invalid_at: Timestamp,
    /// Its `expired_at`: the one it had, or `now`.
    pub expired_at: Timestamp,
}

impl Invalidation {
    /// Writes the change on `edge` if it is the fact named by [`uuid`](Self::uuid);
    /// returns whether it was.
    pub fn apply(&self, edge: &mut EntityEdge) -> bool {
        if edge.uuid != self.uuid {
            return false;
        }
        edge.invalid_at = Some(self.invalid_at);
        edge.expired_at = Some(self.expired_at);
        true
    }
}

/// What the temporal rules decide for one new fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The new fact's times after rules 1 and 2 (equal to the input when neither fired).
    pub new_fact: FactTimes,
    /// Why the new fact changed, if it did.
    pub new_fact_update: Option<NewFactUpdate>,
    /// The existing facts that change, in input order, each once.
    pub invalidated: Vec<Invalidation>,
}

impl Resolution {
    /// Whether the new fact or any existing fact changes.
    pub fn is_empty(&self) -> bool {
        self.new_fact_update.is_none() && self.invalidated.is_empty()
    }

    /// Writes the decided times on `new` (when its uuid matches
    /// [`new_fact`](Self::new_fact)) and on every fact of `existing` named by an
    /// [`Invalidation`]; returns how many existing facts were written.
    pub fn apply(&self, new: &mut EntityEdge, existing: &mut [EntityEdge]) -> usize {
        if new.uuid == self.new_fact.uuid {
            new.invalid_at = self.new_fact.invalid_at;
            new.expired_at = self.new_fact.expired_at;
        }
        let mut written = 0;
        for edge in existing.iter_mut() {
            if self.invalidated.iter().any(|i| i.apply(edge)) {
                written += 1;
            }
        }
        written
    }
}

/// `a < b` when both are known; false otherwise (rule 6).
fn before(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a < b)
}

/// `a <= b` when both are known; false otherwise (rule 6).
fn at_or_before(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a <= b)
}

/// Applies the temporal rules (see the [module docs](self)) to a new fact and the
/// existing facts the model marked as contradicted by it, at `now`.
pub fn resolve(new: FactTimes, contradicted: &[FactTimes], now: Timestamp) -> Resolution {
    // Rule 7 and the self/repeat handling: each contradicted uuid once, never the new fact.
    let mut seen = HashSet::from([new.uuid]);
    let candidates: Vec<&FactTimes> = contradicted
        .iter()
        .filter(|c| seen.insert(c.uuid))
        .collect();

    let mut fact = new;
    let mut update = None;
    // Rule 1: ended on arrival.
    if fact.invalid_at.is_some() && fact.expired_at.is_none() {
        fact.expired_at = Some(now);
        update = Some(NewFactUpdate::Ended);
    }
    // Rule 2: superseded on arrival by the earliest later-valid contradicting fact.
    if fact.expired_at.is_none()
        && let Some(by) = candidates
            .iter()
            .filter(|c| before(fact.valid_at, c.valid_at))
            .min_by_key(|c| c.valid_at)
    {
        fact.invalid_at = by.valid_at;
        fact.expired_at = Some(now);
        update = Some(NewFactUpdate::Superseded { by: by.uuid });
    }

    let invalidated = candidates
        .iter()
        .filter_map(|c| {
            // Rule 3: already over; rule 4: the new fact ends first.
            if at_or_before(c.invalid_at, fact.valid_at)
                || at_or_before(fact.invalid_at, c.valid_at)
            {
                return None;
            }
            // Rule 5: the existing fact became true first, and ends when the new one begins.
            match (c.valid_at, fact.valid_at) {
                (Some(old), Some(start)) if old < start => Some(Invalidation {
                    uuid: c.uuid,
                    invalid_at: start,
                    expired_at: c.expired_at.unwrap_or(now),
                }),
                _ => None,
            }
        })
        .collect();

    Resolution {
        new_fact: fact,
        new_fact_update: update,
        invalidated,
    }
}

/// [`resolve`] on whole facts: `new` and the existing facts the model marked as
/// contradicted by it.
pub fn resolve_edges(new: &EntityEdge, contradicted: &[EntityEdge], now: Timestamp) -> Resolution {
    let contradicted: Vec<FactTimes> = contradicted.iter().map(FactTimes::from).collect();
    resolve(FactTimes::from(new), &contradicted, now)
}

/// Whether a restatement with times `new` adds no date to the stored fact `existing`
/// it restates word for word: its span lies inside the stored span, so it tells the
/// graph nothing the stored fact does not.
///
/// Exactly, all three:
/// * `new.invalid_at` is unknown, or equal to `existing.invalid_at` (a restatement that
///   says the fact ended, when the stored one does not say so or says otherwise, is news);
/// * `new.valid_at` is unknown, or `existing.valid_at` is known, at or before it, and
///   `new.valid_at` is before `existing.invalid_at` when that is known (the fact was
///   already true then: "Alice works at Acme" said in June of a fact stored since
///   January; an earlier start, or a start where the stored one is unknown, is news);
/// * `new.expired_at` is unknown or equal to `existing.expired_at`.
///
/// The fact-resolution step confirms such a restatement without asking the model (see
/// the ingestion module's step 6); any other one goes to the model.
///
/// ```
/// use gralkor::graph::temporal::{adds_no_date, FactTimes};
/// use gralkor::graph::Timestamp;
/// use uuid::Uuid;
///
/// let f = |v: Option<i64>, i: Option<i64>| FactTimes {
///     uuid: Uuid::new_v4(),
///     valid_at: v.map(Timestamp),
///     invalid_at: i.map(Timestamp),
///     expired_at: None,
/// };
/// assert!(adds_no_date(&f(Some(20), None), &f(Some(10), None)));
/// assert!(adds_no_date(&f(None, None), &f(Some(10), None)));
/// assert!(!adds_no_date(&f(Some(5), None), &f(Some(10), None)), "an earlier start");
/// assert!(!adds_no_date(&f(Some(20), None), &f(None, None)), "a start where none was known");
/// assert!(!adds_no_date(&f(Some(20), Some(30)), &f(Some(10), None)), "an end");
/// assert!(!adds_no_date(&f(Some(30), None), &f(Some(10), Some(30))), "after the end");
/// ```
pub fn adds_no_date(new: &FactTimes, existing: &FactTimes) -> bool {
    let end_known = new.invalid_at.is_none() || new.invalid_at == existing.invalid_at;
    let start_inside = match new.valid_at {
        None => true,
        Some(start) => {
            existing.valid_at.is_some_and(|v| v <= start)
                && existing.invalid_at.is_none_or(|end| start < end)
        }
    };
    let expiry_known = new.expired_at.is_none() || new.expired_at == existing.expired_at;
    end_known && start_inside && expiry_known
}

/// Whether marking `existing` as contradicted by `new` would change any date: whether
/// [`resolve`] of `new` against `existing` alone is not [empty](Resolution::is_empty).
///
/// When this is false for every candidate of a new fact, the contradiction half of the
/// model's answer cannot change the graph whatever it says: rule 1 cannot fire (the new
/// fact arrives without an `invalid_at`, or already expired), rule 2 finds no candidate
/// that became true strictly later, and rules 3–6 leave every candidate alone (mostly:
/// a date is missing). Jointly and singly agree — [`resolve`] over several candidates
/// changes something exactly when it changes something for one of them — so the test
/// is made per candidate. The answer does not depend on `now`.
///
/// ```
/// use gralkor::graph::temporal::{could_take_effect, FactTimes};
/// use gralkor::graph::Timestamp;
/// use uuid::Uuid;
///
/// let f = |v: Option<i64>| FactTimes {
///     uuid: Uuid::new_v4(),
///     valid_at: v.map(Timestamp),
///     invalid_at: None,
///     expired_at: None,
/// };
/// assert!(could_take_effect(&f(Some(20)), &f(Some(10))), "rule 5");
/// assert!(could_take_effect(&f(Some(10)), &f(Some(20))), "rule 2");
/// assert!(!could_take_effect(&f(None), &f(Some(10))), "rule 6");
/// assert!(!could_take_effect(&f(Some(10)), &f(Some(10))), "a tie");
/// ```
pub fn could_take_effect(new: &FactTimes, existing: &FactTimes) -> bool {
    !resolve(*new, std::slice::from_ref(existing), Timestamp(0)).is_empty()
}

#[cfg(any(test, feature = "testing"))]
/// Whether `fact` holds at `at`: true in the world (`valid_at` unknown or at or before
/// `at`, and `invalid_at` unknown or after `at` — a half-open span) and not yet retired
/// (`expired_at` unknown or after `at`).
///
/// ```
/// use gralkor::graph::temporal::is_current;
/// use gralkor::graph::{EntityEdge, Timestamp};
/// use uuid::Uuid;
///
/// let mut f = EntityEdge::new(Uuid::new_v4(), Uuid::new_v4(), "WORKS_AT", "Alice works at Acme");
/// f.valid_at = Some(Timestamp(10));
/// f.invalid_at = Some(Timestamp(20));
/// assert!(!is_current(&f, Timestamp(9)));
/// assert!(is_current(&f, Timestamp(10)));
/// assert!(!is_current(&f, Timestamp(20)));
/// ```
pub fn is_current(fact: &EntityEdge, at: Timestamp) -> bool {
    times_current(&FactTimes::from(fact), at)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Span = (Option<i64>, Option<i64>, Option<i64>);

    fn ts(v: Option<i64>) -> Option<Timestamp> {
        v.map(Timestamp)
    }

    fn fact(n: u128, (valid, invalid, expired): Span) -> FactTimes {
        FactTimes {
            uuid: Uuid::from_u128(n),
            valid_at: ts(valid),
            invalid_at: ts(invalid),
            expired_at: ts(expired),
        }
    }

    const NOW: i64 = 1_000;
    const N: Option<i64> = None;

    struct Case {
        name: &'static str,
        new: Span,
        existing: &'static [Span],
        /// The new fact's expected (invalid_at, expired_at).
        new_after: (Option<i64>, Option<i64>),
        update: Option<NewFactUpdate>,
        /// Expected invalidations: (index into `existing`, invalid_at, expired_at).
        invalidated: &'static [(usize, i64, i64)],
    }

    fn check(cases: &[Case]) {
        for c in cases {
            let new = fact(0, c.new);
            let existing: Vec<FactTimes> = c
                .existing
                .iter()
                .enumerate()
                .map(|(i, s)| fact(i as u128 + 1, *s))
                .collect();
            let r = resolve(new, &existing, Timestamp(NOW));
            assert_eq!(r.new_fact.uuid, new.uuid, "{}", c.name);
            assert_eq!(r.new_fact.valid_at, new.valid_at, "{}", c.name);
            assert_eq!(
                (r.new_fact.invalid_at, r.new_fact.expired_at),
                (ts(c.new_after.0), ts(c.new_after.1)),
                "{}: new fact",
                c.name
            );
            assert_eq!(r.new_fact_update, c.update, "{}: update", c.name);
            let expected: Vec<Invalidation> = c
                .invalidated
                .iter()
                .map(|&(i, inv, exp)| Invalidation {
                    uuid: existing[i].uuid,
                    invalid_at: Timestamp(inv),
                    expired_at: Timestamp(exp),
                })
                .collect();
            assert_eq!(r.invalidated, expected, "{}: invalidated", c.name);
        }
    }

    fn sup(n: u128) -> Option<NewFactUpdate> {
        Some(NewFactUpdate::Superseded {
            by: Uuid::from_u128(n),
        })
    }

    const ENDED: Option<NewFactUpdate> = Some(NewFactUpdate::Ended);

    #[test]
    fn rule1_new_fact_with_invalid_at_is_expired_now() {
        check(&[
            Case {
                name: "ended, no candidates",
                new: (Some(10), Some(20), N),
                existing: &[],
                new_after: (Some(20), Some(NOW)),
                update: ENDED,
                invalidated: &[],
            },
            Case {
                name: "ended, unknown valid_at",
                new: (N, Some(20), N),
                existing: &[],
                new_after: (Some(20), Some(NOW)),
                update: ENDED,
                invalidated: &[],
            },
            Case {
                name: "already expired keeps its expired_at",
                new: (Some(10), Some(20), Some(5)),
                existing: &[],
                new_after: (Some(20), Some(5)),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "ended: rule 2 does not run even with a later candidate",
                new: (Some(10), Some(50), N),
                existing: &[(Some(30), N, N)],
                new_after: (Some(50), Some(NOW)),
                update: ENDED,
                invalidated: &[],
            },
            Case {
                name: "ended new fact still invalidates an earlier open candidate",
                new: (Some(10), Some(20), N),
                existing: &[(Some(5), N, N)],
                new_after: (Some(20), Some(NOW)),
                update: ENDED,
                invalidated: &[(0, 10, NOW)],
            },
        ]);
    }

    #[test]
    fn rule2_new_fact_is_superseded_by_the_earliest_later_candidate() {
        check(&[
            Case {
                name: "one later candidate",
                new: (Some(10), N, N),
                existing: &[(Some(30), N, N)],
                new_after: (Some(30), Some(NOW)),
                update: sup(1),
                invalidated: &[],
            },
            Case {
                name: "earliest of several later candidates, whatever the order",
                new: (Some(10), N, N),
                existing: &[(Some(40), N, N), (Some(25), N, N), (Some(30), N, N)],
                new_after: (Some(25), Some(NOW)),
                update: sup(2),
                invalidated: &[],
            },
            Case {
                name: "earlier and later candidates: superseded, and the earlier one ended",
                new: (Some(10), N, N),
                existing: &[(Some(5), N, N), (Some(30), N, N)],
                new_after: (Some(30), Some(NOW)),
                update: sup(2),
                invalidated: &[(0, 10, NOW)],
            },
            Case {
                name: "equal valid_at does not supersede",
                new: (Some(10), N, N),
                existing: &[(Some(10), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "unknown candidate valid_at does not supersede",
                new: (Some(10), N, N),
                existing: &[(N, N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "unknown new valid_at is never superseded",
                new: (N, N, N),
                existing: &[(Some(30), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "an expired new fact without invalid_at is not superseded",
                new: (Some(10), N, Some(7)),
                existing: &[(Some(30), N, N)],
                new_after: (N, Some(7)),
                update: None,
                invalidated: &[],
            },
        ]);
    }

    #[test]
    fn rule3_existing_fact_already_over_is_left_alone() {
        check(&[
            Case {
                name: "ended before the new fact began",
                new: (Some(20), N, N),
                existing: &[(Some(5), Some(15), N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "ended exactly when the new fact began",
                new: (Some(20), N, N),
                existing: &[(Some(5), Some(20), N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "ended, with unknown valid_at",
                new: (Some(20), N, N),
                existing: &[(N, Some(15), N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
        ]);
    }

    #[test]
    fn rule4_existing_fact_starting_after_the_new_one_ends_is_left_alone() {
        check(&[
            Case {
                name: "starts after the new fact ended",
                new: (Some(10), Some(20), N),
                existing: &[(Some(25), N, N)],
                new_after: (Some(20), Some(NOW)),
                update: ENDED,
                invalidated: &[],
            },
            Case {
                name: "starts exactly when the new fact ended",
                new: (Some(10), Some(20), N),
                existing: &[(Some(20), N, N)],
                new_after: (Some(20), Some(NOW)),
                update: ENDED,
                invalidated: &[],
            },
            Case {
                name: "the new fact ends where rule 2 put it",
                new: (Some(10), N, N),
                existing: &[(Some(30), N, N), (Some(40), N, N)],
                new_after: (Some(30), Some(NOW)),
                update: sup(1),
                invalidated: &[],
            },
        ]);
    }

    #[test]
    fn rule5_earlier_existing_fact_ends_when_the_new_one_begins() {
        check(&[
            Case {
                name: "open-ended earlier fact",
                new: (Some(20), N, N),
                existing: &[(Some(5), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[(0, 20, NOW)],
            },
            Case {
                name: "a later invalid_at is shortened",
                new: (Some(20), N, N),
                existing: &[(Some(5), Some(30), N)],
                new_after: (N, N),
                update: None,
                invalidated: &[(0, 20, NOW)],
            },
            Case {
                name: "an existing expired_at is kept",
                new: (Some(20), N, N),
                existing: &[(Some(5), N, Some(7))],
                new_after: (N, N),
                update: None,
                invalidated: &[(0, 20, 7)],
            },
            Case {
                name: "several, in input order",
                new: (Some(20), N, N),
                existing: &[(Some(8), N, N), (Some(25), N, N), (Some(3), N, N)],
                new_after: (Some(25), Some(NOW)),
                update: sup(2),
                invalidated: &[(0, 20, NOW), (2, 20, NOW)],
            },
            Case {
                name: "one microsecond earlier is enough",
                new: (Some(20), N, N),
                existing: &[(Some(19), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[(0, 20, NOW)],
            },
        ]);
    }

    #[test]
    fn rule6_missing_dates_and_ties_invalidate_nothing() {
        check(&[
            Case {
                name: "new valid_at unknown",
                new: (N, N, N),
                existing: &[(Some(5), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "existing valid_at unknown",
                new: (Some(20), N, N),
                existing: &[(N, N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "existing valid_at unknown, invalid_at later",
                new: (Some(20), N, N),
                existing: &[(N, Some(30), N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "no dates anywhere",
                new: (N, N, N),
                existing: &[(N, N, N), (N, N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
            Case {
                name: "equal valid_at: neither wins",
                new: (Some(20), N, N),
                existing: &[(Some(20), N, N)],
                new_after: (N, N),
                update: None,
                invalidated: &[],
            },
        ]);
    }

    #[test]
    fn rule7_self_and_repeated_uuids() {
        let new = fact(0, (Some(20), N, N));
        let earlier = fact(1, (Some(5), N, N));
        let stale_self = fact(0, (Some(5), N, N));
        let r = resolve(
            new,
            &[stale_self, earlier, earlier, fact(1, (Some(1), N, N))],
            Timestamp(NOW),
        );
        assert_eq!(r.new_fact, new);
        assert_eq!(r.new_fact_update, None);
        assert_eq!(
            r.invalidated,
            vec![Invalidation {
                uuid: earlier.uuid,
                invalid_at: Timestamp(20),
                expired_at: Timestamp(NOW),
            }]
        );
        let r = resolve(new, &[], Timestamp(NOW));
        assert!(r.is_empty());
        assert_eq!(r.new_fact, new);
    }

    #[test]
    fn alice_acme_globex_in_both_orders() {
        let t = |s: &str| s.parse::<Timestamp>().unwrap().0;
        let (jan24, mar25) = (t("2024-01-15T00:00:00Z"), t("2025-03-01T00:00:00Z"));
        let now = Timestamp(NOW);
        // Acme (1) stored, Globex (0) arrives: the Acme fact ends in March 2025.
        let r = resolve(
            fact(0, (Some(mar25), N, N)),
            &[fact(1, (Some(jan24), N, N))],
            now,
        );
        assert_eq!(r.new_fact_update, None);
        assert_eq!(
            r.invalidated,
            vec![Invalidation {
                uuid: Uuid::from_u128(1),
                invalid_at: Timestamp(mar25),
                expired_at: now,
            }]
        );
        // Globex (1) stored, Acme (0) arrives: the new Acme fact ends in March 2025.
        let r = resolve(
            fact(0, (Some(jan24), N, N)),
            &[fact(1, (Some(mar25), N, N))],
            now,
        );
        assert_eq!(r.new_fact_update, sup(1));
        assert_eq!(r.new_fact.invalid_at, Some(Timestamp(mar25)));
        assert_eq!(r.new_fact.expired_at, Some(now));
        assert!(r.invalidated.is_empty());
    }

    #[test]
    fn a_restatement_adds_no_date_only_inside_the_stored_span() {
        let cases: &[(Span, Span, bool, &str)] = &[
            ((N, N, N), (N, N, N), true, "no dates anywhere"),
            (
                (N, N, N),
                (Some(10), Some(20), N),
                true,
                "no dates on the restatement",
            ),
            ((Some(10), N, N), (Some(10), N, N), true, "the same start"),
            (
                (Some(15), N, N),
                (Some(10), N, N),
                true,
                "said later, still true",
            ),
            (
                (Some(15), N, N),
                (Some(10), Some(20), N),
                true,
                "inside a closed span",
            ),
            (
                (Some(15), Some(20), N),
                (Some(10), Some(20), N),
                true,
                "the same end",
            ),
            ((Some(5), N, N), (Some(10), N, N), false, "an earlier start"),
            (
                (Some(10), N, N),
                (N, N, N),
                false,
                "a start where none was known",
            ),
            (
                (Some(20), N, N),
                (Some(10), Some(20), N),
                false,
                "at the stored end",
            ),
            (
                (Some(25), N, N),
                (Some(10), Some(20), N),
                false,
                "after the stored end",
            ),
            (
                (N, Some(20), N),
                (Some(10), N, N),
                false,
                "an end where none was known",
            ),
            (
                (N, Some(30), N),
                (Some(10), Some(20), N),
                false,
                "another end",
            ),
            ((N, N, Some(3)), (Some(10), N, N), false, "an expiry"),
        ];
        for &(new, existing, expected, name) in cases {
            assert_eq!(
                adds_no_date(&fact(0, new), &fact(1, existing)),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn a_contradiction_takes_effect_exactly_when_resolve_changes_something() {
        let spans: Vec<Span> = [N, Some(10), Some(20), Some(30)]
            .into_iter()
            .flat_map(|v| [N, Some(15), Some(25)].map(move |i| (v, i, N)))
            .chain([(Some(10), N, Some(5)), (N, Some(20), Some(5))])
            .collect();
        for &a in &spans {
            for &b in &spans {
                let (new, old) = (fact(0, a), fact(1, b));
                let joint = resolve(new, &[old], Timestamp(NOW));
                assert_eq!(
                    could_take_effect(&new, &old),
                    !joint.is_empty(),
                    "{a:?} {b:?}"
                );
                // Several candidates: something changes iff it does for one of them.
                for &c in &spans {
                    let other = fact(2, c);
                    assert_eq!(
                        !resolve(new, &[old, other], Timestamp(NOW)).is_empty(),
                        could_take_effect(&new, &old) || could_take_effect(&new, &other),
                        "{a:?} {b:?} {c:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn is_current_uses_half_open_spans() {
        let cases: &[(Span, i64, bool)] = &[
            ((N, N, N), 0, true),
            ((Some(10), N, N), 9, false),
            ((Some(10), N, N), 10, true),
            ((Some(10), Some(20), N), 19, true),
            ((Some(10), Some(20), N), 20, false),
            ((N, Some(20), N), 0, true),
            ((Some(10), N, Some(15)), 14, true),
            ((Some(10), N, Some(15)), 15, false),
            ((Some(10), Some(20), Some(30)), 15, true),
        ];
        for &(span, at, expected) in cases {
            let f = fact(1, span);
            assert_eq!(
                times_current(&f, Timestamp(at)),
                expected,
                "{span:?} at {at}"
            );
            let mut e = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "f");
            e.uuid = f.uuid;
            e.valid_at = f.valid_at;
            e.invalid_at = f.invalid_at;
            e.expired_at = f.expired_at;
            assert_eq!(is_current(&e, Timestamp(at)), expected, "{span:?} at {at}");
        }
    }

    #[test]
    fn apply_writes_only_named_facts() {
        let mut new = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "new");
        new.valid_at = Some(Timestamp(20));
        let mut old = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "old");
        old.valid_at = Some(Timestamp(5));
        let mut other = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "other");
        other.valid_at = Some(Timestamp(5));
        let r = resolve_edges(&new, std::slice::from_ref(&old), Timestamp(NOW));
        let before_new = new.clone();
        let before_other = other.clone();
        let mut existing = [old.clone(), other.clone()];
        assert_eq!(r.apply(&mut new, &mut existing), 1);
        assert_eq!(new, before_new);
        assert_eq!(existing[0].invalid_at, Some(Timestamp(20)));
        assert_eq!(existing[0].expired_at, Some(Timestamp(NOW)));
        assert_eq!(existing[1], before_other);
        // A different new fact is not written.
        let mut stranger = EntityEdge::new(Uuid::nil(), Uuid::nil(), "R", "x");
        let copy = stranger.clone();
        let ended = resolve(fact(7, (Some(1), Some(2), N)), &[], Timestamp(NOW));
        ended.apply(&mut stranger, &mut []);
        assert_eq!(stranger, copy);
    }
}
