//! Filters and time: what a search may return, turned into a Cypher `WHERE` clause that
//! runs **after** the index call, on the hits it yields.
//!
//! ## Time
//!
//! Each fact carries `valid_at` / `invalid_at` (true in the world from / until, a
//! half-open span) and `expired_at` (when gralkor retired it, e.g. because a
//! contradicting fact arrived — the engine then also sets `invalid_at`). [`TimeMode`]
//! picks which facts a search sees:
//!
//! * [`TimeMode::Current`] (the default): facts not retired and not ended —
//!   `expired_at IS NULL AND (invalid_at IS NULL OR invalid_at > now)`. A fact that
//!   starts in the future (a plan) is current knowledge and is included. Invalidated
//!   facts never come back as current (Graphiti #1645, #1664 returned them).
//! * [`TimeMode::History`]: every fact, retired or not.
//! * [`TimeMode::AsOf`]`(t)`: what was true at `t` — `valid_at` unknown or `<= t`,
//!   `invalid_at` unknown or `> t`, and `expired_at` unknown or `> t`. This is exactly
//!   [`temporal::is_current`](crate::graph::temporal::is_current), so search and the
//!   engine agree. `expired_at` matters only for a fact retired without a world end
//!   date: it is taken as true until it was retired. A fact retired *because* it was
//!   contradicted already carries the `invalid_at` the contradiction gave it, so "what
//!   was true on 2025-01-01" still returns it when it held then, even though it was
//!   retired later.
//!
//! The time mode applies to facts, and `AsOf(t)` also to episodes: only those that had
//! happened by `t` (`valid_at` unknown or `<= t`), inside every episode statement
//! (fulltext, vector, hybrid) before its limit. An episode's vector candidates come from
//! the index first, so a search as of a time should ask for more of them (the native
//! storage asks for the most). Entities and communities have no span.
//!
//! ## Date filters
//!
//! `valid_at`, `invalid_at`, `created_at` and `expired_at` each take OR-of-AND groups:
//! `[[a, b], [c]]` means `(a AND b) OR c`. Every condition gets its own parameter,
//! named by field, group and position (`flt_valid_at_1_0`), so two groups never
//! overwrite each other's values (Graphiti names them by position only, and they do).
//! In Cypher, a comparison with a missing date is not true: `Ne(t)` does not match a
//! fact without that date; ask for [`DateFilter::IsNull`] explicitly.
//!
//! ## Source selections: writers and episodes
//!
//! [`SearchFilters::writers`] selects by the `writer` property of episodes (an
//! episode without one is never selected); [`SearchFilters::episodes`] selects
//! episodes by uuid (the authorization pre-filter: the fragments a subject may view
//! outside the groups it may read). Both are one **source selection**: an episode is
//! selected when it meets every selection given (a listed uuid *and* a selected
//! writer, when both are). It runs inside each method's statement, **before** the
//! limit, so a writer with 3 of 500 matching episodes — or a subject involved in 3 of
//! 500 — gets all 3:
//!
//! * episodes: every fulltext match is filtered, then the best are kept; the vector
//!   method ranks the selected episodes exactly;
//! * facts: every candidate's source episodes (`episodes`) are looked up by uuid and
//!   the fact is kept when one of them is selected. The index's (or the fulltext
//!   ranking's) first candidates are filtered, then ten times as many, and when even
//!   those leave too few, every fulltext match, or for vector an exact ranking of the
//!   selected episodes' facts — see [`methods`](super::methods#source-selections);
//!   the breadth-first walk filters each level before its cut.
//!
//! A fact hit's `sources` then list only its selected episodes. Entities and
//! communities have no source and are not restricted. A membership test is written
//! `toString(x) IN $list`: a bare `x IN $list` on a property can crash FalkorDB 4.16
//! (see `falkordb::statement`).

use uuid::Uuid;

use crate::falkordb::{Params, Value};
use crate::graph::model::Timestamp;
use crate::{Error, Result};

/// Which facts a search sees in time; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeMode {
    /// Facts neither retired nor ended (the default).
    #[default]
    Current,
    /// Every fact, retired or not.
    History,
    /// Facts true at this instant, and episodes that had happened by then.
    AsOf(Timestamp),
}

/// One condition on a date property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateFilter {
    /// Equal to.
    Eq(Timestamp),
    /// Not equal to (a missing date does not match).
    Ne(Timestamp),
    /// Strictly before.
    Lt(Timestamp),
    /// At or before.
    Le(Timestamp),
    /// Strictly after.
    Gt(Timestamp),
    /// At or after.
    Ge(Timestamp),
    /// The date is missing.
    IsNull,
    /// The date is present.
    IsNotNull,
}

/// What a search may return. Empty lists filter nothing. See the module docs
/// for time and date filters.
///
/// ```
/// use gralkor::graph::search::{DateFilter, SearchFilters, TimeMode};
/// use gralkor::graph::Timestamp;
///
/// let t = |s: &str| s.parse::<Timestamp>().unwrap();
/// // Facts of type WORKS_AT that started in 2023 or in 2025, whatever their state.
/// let filters = SearchFilters {
///     fact_types: vec!["WORKS_AT".into()],
///     valid_at: vec![
///         vec![DateFilter::Ge(t("2023-01-01T00:00:00Z")), DateFilter::Lt(t("2024-01-01T00:00:00Z"))],
///         vec![DateFilter::Ge(t("2025-01-01T00:00:00Z")), DateFilter::Lt(t("2026-01-01T00:00:00Z"))],
///     ],
///     time: TimeMode::History,
///     ..SearchFilters::default()
/// };
/// # let _ = filters;
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchFilters {
    /// Entities must carry one of these labels; for facts, both endpoints must.
    pub entity_labels: Vec<String>,
    /// Facts must have one of these relation types (`name`).
    pub fact_types: Vec<String>,
    /// Facts must be one of these.
    pub fact_uuids: Vec<Uuid>,
    /// Entities must be one of these; facts must have one of them as an endpoint.
    pub entity_uuids: Vec<Uuid>,
    /// Conditions on facts' `valid_at` (OR of AND groups).
    pub valid_at: Vec<Vec<DateFilter>>,
    /// Conditions on facts' `invalid_at`.
    pub invalid_at: Vec<Vec<DateFilter>>,
    /// Conditions on facts' `created_at`.
    pub created_at: Vec<Vec<DateFilter>>,
    /// Conditions on facts' `expired_at`.
    pub expired_at: Vec<Vec<DateFilter>>,
    /// Which facts are seen in time.
    pub time: TimeMode,
    /// Writer keys ([`Episode::writer`](crate::graph::Episode#structfield.writer)):
    /// episodes must have one of them as their writer; facts must have at least one
    /// source episode (`episodes`) with one of them, and a fact hit lists only those
    /// sources. Entities and communities are not restricted. See the
    /// module docs.
    pub writers: Vec<String>,
    /// Episode uuids: episodes must be one of them; facts must have at least one
    /// source episode (`episodes`) among them, and a fact hit lists only those
    /// sources. With [`writers`](Self::writers) too, a source must meet both.
    /// Entities and communities are not restricted. Empty: no restriction. See the
    /// module docs.
    pub episodes: Vec<Uuid>,
}

/// A conjunction of Cypher conditions and their parameters, and for facts the
/// source selection that applies (as a clause, [`Where::sourced`]).
#[derive(Debug, Default)]
pub(crate) struct Where {
    conditions: Vec<String>,
    pub(crate) params: Params,
    sources: Sources,
}

/// Which source selections apply to a fact's episodes (see the
/// [module docs](self#source-selections-writers-and-episodes)).
#[derive(Debug, Default, Clone, Copy)]
struct Sources {
    writers: bool,
    episodes: bool,
}

impl Sources {
    /// The condition a source episode bound to `var` must meet, if any selection
    /// applies.
    fn condition(self, var: &str) -> Option<String> {
        let mut c = Vec::new();
        if self.writers {
            c.push(format!("toString({var}.writer) IN $flt_writers"));
        }
        if self.episodes {
            c.push(format!("toString({var}.uuid) IN $flt_episodes"));
        }
        (!c.is_empty()).then(|| c.join(" AND "))
    }
}

impl Where {
    /// ` AND cond AND …` (empty when there is no condition), to follow a `WHERE` that
    /// already has one condition.
    pub(crate) fn and_clause(&self) -> String {
        self.conditions
            .iter()
            .map(|c| format!(" AND {c}"))
            .collect()
    }

    /// Whether there is no condition.
    pub(crate) fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// `WHERE cond AND …`, or nothing.
    pub(crate) fn where_clause(&self) -> String {
        if self.conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", self.conditions.join(" AND "))
        }
    }

    /// Whether a source selection (writers, episodes or both) applies (facts only).
    pub(crate) fn selects_sources(&self) -> bool {
        self.sources.writers || self.sources.episodes
    }

    /// For facts bound to `f`: clauses keeping only the rows whose fact has a
    /// selected source episode, each looked up by its indexed uuid, then
    /// `WITH DISTINCT {carry}` (`carry` names `f` and whatever else goes on); nothing
    /// when no source selection applies.
    pub(crate) fn sourced(&self, carry: &str) -> String {
        let Some(condition) = self.sources.condition("flt_ep") else {
            return String::new();
        };
        format!(
            " UNWIND coalesce(f.episodes, []) AS flt_eu \
             MATCH (flt_ep:Episodic {{uuid: flt_eu}}) \
             WHERE {condition} \
             WITH DISTINCT {carry} "
        )
    }

    /// The condition on a source episode bound to `ep` that a fact's listed sources
    /// must meet (` WHERE …`), or nothing.
    pub(crate) fn source_condition(&self) -> String {
        self.sources
            .condition("ep")
            .map(|c| format!(" WHERE {c}"))
            .unwrap_or_default()
    }

    /// A clause binding each selected episode to `var` once, through the uuid (or
    /// writer) range index: the selected uuids when episodes are selected (the
    /// writer condition, if any, is left to the caller's filters), else the selected
    /// writers' episodes. Nothing when no selection applies.
    pub(crate) fn selected_episodes(&self, var: &str) -> Option<String> {
        if self.sources.episodes {
            Some(format!(
                "UNWIND $flt_episodes AS flt_su MATCH ({var}:Episodic {{uuid: flt_su}})"
            ))
        } else if self.sources.writers {
            Some(format!(
                "UNWIND $flt_writers AS flt_sw MATCH ({var}:Episodic {{writer: flt_sw}})"
            ))
        } else {
            None
        }
    }

    fn push(&mut self, condition: String) {
        self.conditions.push(condition);
    }

    fn param(&mut self, name: &str, value: impl Into<Value>) {
        self.params.insert(name, value);
    }

    /// Records the filters' source selection and its parameters.
    fn select_sources(&mut self, filters: &SearchFilters) {
        if !filters.writers.is_empty() {
            self.sources.writers = true;
            self.param("flt_writers", filters.writers.clone());
        }
        if !filters.episodes.is_empty() {
            // Each once: the exact passes bind every listed uuid.
            let mut episodes = filters.episodes.clone();
            episodes.sort_unstable();
            episodes.dedup();
            self.sources.episodes = true;
            self.param("flt_episodes", uuid_list(&episodes));
        }
    }
}

fn uuid_list(list: &[Uuid]) -> Value {
    Value::List(list.iter().map(|u| Value::String(u.to_string())).collect())
}

impl SearchFilters {
    /// Checks the filters; errors name the field and the rule.
    pub(crate) fn check(&self) -> Result<()> {
        for (i, writer) in self.writers.iter().enumerate() {
            if writer.trim().is_empty() || writer.contains('\0') {
                return Err(Error::invalid(
                    format!("filters.writers[{i}]"),
                    "must be a writer key: not blank, no NUL character",
                ));
            }
        }
        for (name, groups) in self.date_fields() {
            for (i, group) in groups.iter().enumerate() {
                if group.is_empty() {
                    return Err(Error::invalid(
                        format!("filters.{name}[{i}]"),
                        "must hold at least one condition (an empty group would match everything)",
                    ));
                }
            }
        }
        Ok(())
    }

    fn date_fields(&self) -> [(&'static str, &Vec<Vec<DateFilter>>); 4] {
        [
            ("valid_at", &self.valid_at),
            ("invalid_at", &self.invalid_at),
            ("created_at", &self.created_at),
            ("expired_at", &self.expired_at),
        ]
    }

    /// The conditions on the fact bound to `f`, evaluated at `now` for
    /// [`TimeMode::Current`].
    ///
    /// A membership test is written `toString(f.k) IN $list`: a bare `f.k IN $list`
    /// can crash FalkorDB 4.16 (see `falkordb::statement`), and
    /// `any(x IN $list WHERE x = f.k)` after a `WITH` is wrongly false there.
    pub(crate) fn fact_where(&self, now: Timestamp) -> Where {
        let mut w = Where::default();
        match self.time {
            TimeMode::Current => {
                w.push(
                    "f.expired_at IS NULL AND (f.invalid_at IS NULL OR f.invalid_at > $flt_now)"
                        .into(),
                );
                w.param("flt_now", now.0);
            }
            TimeMode::History => {}
            TimeMode::AsOf(t) => {
                w.push(
                    "(f.valid_at IS NULL OR f.valid_at <= $flt_as_of) \
                     AND (f.invalid_at IS NULL OR f.invalid_at > $flt_as_of) \
                     AND (f.expired_at IS NULL OR f.expired_at > $flt_as_of)"
                        .into(),
                );
                w.param("flt_as_of", t.0);
            }
        }
        if !self.fact_types.is_empty() {
            w.push("toString(f.name) IN $flt_fact_types".into());
            w.param("flt_fact_types", self.fact_types.clone());
        }
        if !self.fact_uuids.is_empty() {
            w.push("toString(f.uuid) IN $flt_fact_uuids".into());
            w.param("flt_fact_uuids", uuid_list(&self.fact_uuids));
        }
        if !self.entity_uuids.is_empty() {
            w.push(
                "(toString(f.source_uuid) IN $flt_entity_uuids \
                 OR toString(f.target_uuid) IN $flt_entity_uuids)"
                    .into(),
            );
            w.param("flt_entity_uuids", uuid_list(&self.entity_uuids));
        }
        if !self.entity_labels.is_empty() {
            w.push(
                "any(l IN labels(startNode(f)) WHERE l IN $flt_labels) \
                 AND any(l IN labels(endNode(f)) WHERE l IN $flt_labels)"
                    .into(),
            );
            w.param("flt_labels", self.entity_labels.clone());
        }
        w.select_sources(self);
        for (name, groups) in self.date_fields() {
            if groups.is_empty() {
                continue;
            }
            let mut ors = Vec::new();
            for (g, group) in groups.iter().enumerate() {
                let mut ands = Vec::new();
                for (i, cond) in group.iter().enumerate() {
                    let p = format!("flt_{name}_{g}_{i}");
                    let prop = format!("f.{name}");
                    let (op, at) = match cond {
                        DateFilter::Eq(t) => ("=", Some(t)),
                        DateFilter::Ne(t) => ("<>", Some(t)),
                        DateFilter::Lt(t) => ("<", Some(t)),
                        DateFilter::Le(t) => ("<=", Some(t)),
                        DateFilter::Gt(t) => (">", Some(t)),
                        DateFilter::Ge(t) => (">=", Some(t)),
                        DateFilter::IsNull => ("IS NULL", None),
                        DateFilter::IsNotNull => ("IS NOT NULL", None),
                    };
                    match at {
                        // An equality is written as a closed range: `OR` between two
                        // equalities of one property becomes an `IN` lookup in
                        // FalkorDB 4.16, a shape `falkordb::statement` refuses.
                        Some(t) if op == "=" => {
                            ands.push(format!("{prop} >= ${p} AND {prop} <= ${p}"));
                            w.param(&p, t.0);
                        }
                        Some(t) => {
                            ands.push(format!("{prop} {op} ${p}"));
                            w.param(&p, t.0);
                        }
                        None => ands.push(format!("{prop} {op}")),
                    }
                }
                ors.push(format!("({})", ands.join(" AND ")));
            }
            w.push(format!("({})", ors.join(" OR ")));
        }
        w
    }

    /// The conditions on the episode bound to `e`: the source selection and, as of a
    /// time, only episodes that had happened by then (`valid_at` unknown or `<= t`).
    pub(crate) fn episode_where(&self) -> Where {
        let mut w = Where::default();
        w.select_sources(self);
        if let Some(c) = w.sources.condition("e") {
            w.push(c);
        }
        if let TimeMode::AsOf(t) = self.time {
            w.push("(e.valid_at IS NULL OR e.valid_at <= $flt_as_of)".into());
            w.param("flt_as_of", t.0);
        }
        w
    }

    /// Whether a source selection (writers, episodes or both) applies.
    pub(crate) fn selects_sources(&self) -> bool {
        !self.writers.is_empty() || !self.episodes.is_empty()
    }

    /// The conditions on the entity bound to `n`.
    pub(crate) fn entity_where(&self) -> Where {
        let mut w = Where::default();
        if !self.entity_labels.is_empty() {
            w.push("any(l IN labels(n) WHERE l IN $flt_labels)".into());
            w.param("flt_labels", self.entity_labels.clone());
        }
        if !self.entity_uuids.is_empty() {
            w.push("toString(n.uuid) IN $flt_entity_uuids".into());
            w.param("flt_entity_uuids", uuid_list(&self.entity_uuids));
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_groups_get_distinct_parameters() {
        let f = SearchFilters {
            valid_at: vec![
                vec![DateFilter::Ge(Timestamp(1)), DateFilter::Lt(Timestamp(2))],
                vec![DateFilter::Ge(Timestamp(3)), DateFilter::IsNotNull],
            ],
            time: TimeMode::History,
            ..SearchFilters::default()
        };
        let w = f.fact_where(Timestamp(0));
        assert_eq!(
            w.where_clause(),
            "WHERE ((f.valid_at >= $flt_valid_at_0_0 AND f.valid_at < $flt_valid_at_0_1) \
             OR (f.valid_at >= $flt_valid_at_1_0 AND f.valid_at IS NOT NULL))"
        );
        assert_eq!(w.params.get("flt_valid_at_0_0"), Some(&Value::Int(1)));
        assert_eq!(w.params.get("flt_valid_at_0_1"), Some(&Value::Int(2)));
        assert_eq!(w.params.get("flt_valid_at_1_0"), Some(&Value::Int(3)));
        assert_eq!(w.params.len(), 3);
    }

    #[test]
    fn a_source_selection_by_writer_and_uuid_needs_both_and_tests_membership_with_to_string() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let f = SearchFilters {
            writers: vec!["lens:a".into()],
            episodes: vec![b, a, b],
            ..SearchFilters::default()
        };
        let both = "toString(ep.writer) IN $flt_writers AND toString(ep.uuid) IN $flt_episodes";
        let w = f.fact_where(Timestamp(0));
        assert!(w.selects_sources());
        assert_eq!(w.source_condition(), format!(" WHERE {both}"));
        assert!(w.sourced("f").contains(&both.replace("ep.", "flt_ep.")));
        // Each uuid once, sorted: the exact passes bind every listed one.
        assert_eq!(
            w.params.get("flt_episodes"),
            Some(&Value::List(vec![
                Value::String(a.to_string()),
                Value::String(b.to_string())
            ]))
        );
        let e = f.episode_where();
        assert_eq!(
            e.where_clause(),
            format!("WHERE {}", both.replace("ep.", "e."))
        );
        // The exact passes start from the uuids, the writer left to the conditions.
        assert_eq!(
            e.selected_episodes("e").as_deref(),
            Some("UNWIND $flt_episodes AS flt_su MATCH (e:Episodic {uuid: flt_su})")
        );
        // Writers alone: through the writer index; nothing selected: no clause.
        let writers = SearchFilters {
            writers: vec!["lens:a".into()],
            ..SearchFilters::default()
        };
        assert_eq!(
            writers.episode_where().selected_episodes("e").as_deref(),
            Some("UNWIND $flt_writers AS flt_sw MATCH (e:Episodic {writer: flt_sw})")
        );
        let none = SearchFilters::default().fact_where(Timestamp(0));
        assert!(!none.selects_sources());
        assert_eq!(none.sourced("f"), "");
        assert_eq!(none.source_condition(), "");
        assert!(none.selected_episodes("e").is_none());
    }

    #[test]
    fn an_empty_group_is_rejected() {
        let f = SearchFilters {
            expired_at: vec![vec![DateFilter::IsNull], vec![]],
            ..SearchFilters::default()
        };
        let e = f.check().unwrap_err();
        assert!(e.to_string().contains("filters.expired_at[1]"), "{e}");
    }
}
