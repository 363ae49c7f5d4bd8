//! The ingestion engine: [`Engine`] owns the database handle and the models, and
//! [`Engine::add_episode`] turns an episode into entities and facts, durably,
//! idempotently, and with a bounded number of model calls.
//!
//! ## The files
//!
//! * `engine` — the handle: [`Engine`] (constructors, accessors, owned content,
//!   removal, communities) and [`EngineOptions`]; `engine_search` — its indices,
//!   their status, and search;
//! * `types` — what goes in and comes out: [`AddEpisode`], [`EpisodeOutcome`],
//!   [`ResumeReport`], [`IngestUsage`], [`OutcomeStatus`];
//! * `pipeline` — one episode from its durable pending write to its fenced commit,
//!   and [`Engine::resume_pending`];
//! * `work` — the model steps of one claimed episode (extraction, embeddings,
//!   resolution), with `entities`, `facts` and `details` for the resolution steps;
//! * `lease` — keeping a claim alive; `retry` — the retry of a lost connection;
//! * `triplet` — [`Engine::add_triplet`].
//!
//! ## The pipeline of one episode
//!
//! 1. **Durable first.** The episode is written as `pending` (and is at once
//!    searchable by its text) before any model call. Whatever happens next — a crash, a
//!    429 storm, a missing model — the episode is never lost and the graph is never half
//!    written; [`Engine::resume_pending`] finishes pending episodes later.
//! 2. **Claim.** The writer claims the episode in the graph (a lease on the server's
//!    clock, renewed in the background, and a generation fence; see *The claim* below),
//!    so two processes cannot both process it and a writer that lost its claim cannot
//!    commit.
//! 3. **Extraction** — language-model call 1 ([`extract`](super::extract())): entities
//!    and facts together, with the graph's latest previous episodes as context. The
//!    same round trip that writes and claims the episode also reads the **known
//!    facts**: the current facts touching every stored entity whose name the episode's
//!    text contains word for word (each run of one to six words looked up by its
//!    normalised name), the newest 40. When there are any, the call shows them,
//!    numbered, and its schema asks per extracted fact which known fact it `restates`
//!    (the same relation and meaning between the same entities, in any words, perhaps
//!    with a date added) and which it `contradicts` — so the model judges resolution
//!    while it reads the episode, and step 6 usually needs no call of its own.
//! 4. **Embeddings** — embedding request 1: every extracted name and fact text in one
//!    batch.
//! 5. **Entity resolution**: candidates for all names in one pipeline
//!    ([`entity_candidates`](super::entity_candidates)), the deterministic pass of
//!    [`dedup`](super::dedup) (exact normalised names, MinHash/Jaccard), then —
//!    language-model call 2, only when some name is still ambiguous (several or
//!    low-information matches, or an unmatched name whose embedding is close to an
//!    existing entity's, see [`EngineOptions::entity_similarity`]) — one batched call.
//!    A merge keeps the union of labels and the existing attributes.
//! 6. **Fact resolution**: for all new facts at once, the current facts between the
//!    same entities (possible duplicates) and the nearest current facts touching
//!    either entity (possible contradictions). Then, without the model, every **exact
//!    restatement** is confirmed: a new fact with a current candidate that has the same
//!    source, the same target (same direction), the same relation name and the same
//!    text under [`dedup::normalize_fact`](super::dedup::normalize_fact) (case folded,
//!    whitespace collapsed, edge punctuation such as a final `.` trimmed; nothing else),
//!    whose dates stay inside that candidate's span
//!    ([`temporal::adds_no_date`](super::temporal::adds_no_date): no start where none
//!    was known, no earlier start, no start at or after a known end, no new end). The
//!    episode is added to that fact's `episodes` (the first such candidate, oldest
//!    first), and no new fact is made. A new fact **every one of whose candidates that
//!    matters** (the kinds listed below) was among the known facts of step 3 takes the
//!    extraction call's verdict instead: the model saw each of them beside the episode
//!    and said which one it restates and which it contradicts, exactly what call 3
//!    would ask. Its answer is checked as call 3's is (a restatement must be a
//!    candidate between the same entities; a contradiction one of the fact's own
//!    candidates). Call 3 — one batched call that marks duplicates
//!    and contradictions — then covers only the other new facts (a candidate the
//!    extraction did not see: a name the text does not spell out, such as a pronoun or
//!    a nickname, a fact written by another process meanwhile, or a neighbourhood past
//!    the 40 known facts) that have
//!    * a candidate between the same entities (it could be a paraphrase: "Alice is
//!      employed by Acme" of "Alice works at Acme"), or
//!    * a candidate whose contradiction would change a date under
//!      [`temporal`](super::temporal)'s rules
//!      ([`temporal::could_take_effect`](super::temporal::could_take_effect): an earlier
//!      open fact it would end, a later one that would end it, or the new fact arrives
//!      with an end date). A fact none of whose candidates could change a date this
//!      way (undated ones, ties, facts already over when it begins) is not asked:
//!      whatever the model marked, the rules would change nothing.
//!
//!    No such fact, no call. A duplicate adds the episode to the existing fact;
//!    contradictions go through [`temporal`](super::temporal)'s invalidation rules.
//!
//!    *Why a restatement needs no call even when other candidates could contradict it.*
//!    It says nothing the graph does not already hold: the same statement, between the
//!    same entities, in a span the stored fact already covers. A current fact that
//!    contradicts it contradicts the stored fact over that same span, and both being
//!    current means that pair was already resolved — the model found them compatible
//!    when the later of the two arrived (if the other was among its candidates), or the
//!    temporal rules could not order them (a missing or equal date). Asking again would
//!    bring no new statement and no new date; and a duplicate, whoever recognises it,
//!    ends nothing (the model's answer for a fact it calls a duplicate is not applied to
//!    other facts, as before this rule), so the call could only confirm — the graph is
//!    the same with or without it. A restatement that *does* bring a date — an earlier start, a start where
//!    none was known, an end — is not exact by the rule above and goes to the model,
//!    where the contradiction rules apply as before. Another new fact of the same
//!    episode can still contradict (and end) the fact a restatement confirms.
//! 7. **Details**: an entity's summary grows by the sentences of its new facts; call 4,
//!    only when needed, condenses every summary that outgrew
//!    [`EngineOptions::summary_budget`] and fills the ontology attributes of typed
//!    entities that learned something.
//! 8. **Commit**: entities, facts, fact updates, `MENTIONS` and the completion marker
//!    in one atomic statement, fenced by the claim's generation.
//!
//! So an episode costs **at most 4 language-model calls and 1 embedding request**
//! whatever the number of entities and facts it yields; [`IngestUsage`] reports the
//! exact counts, and `db_round_trips` every request sent to FalkorDB on the episode's
//! behalf (counted where requests leave the handle, so none is missed: every retry,
//! the candidate query's listing of indices and rerun when an index is missing, the
//! lease renewals, a vector-index rebuild, the graph's index preparation on its first
//! write through a handle, a reload of the schema cache): typically 5 — the write with
//! its claim and context, the entity candidates, the fact candidates, and the
//! commit's two (the in-flight mark, then the commit).
//! (Graphiti makes about 3 + M calls for M facts.) An episode that restates,
//! paraphrases or contradicts what the graph holds, in names it spells out, costs 1
//! call (extraction) and 1 embedding request.
//!
//! ## The claim
//!
//! An `Episodic` node carries three bookkeeping properties besides its data:
//! `generation` (how many times a writer has claimed it), `lease_owner` (the writer
//! holding the claim) and `lease_until` (milliseconds on the **server's** clock,
//! `timestamp()`, so writers on machines with skewed clocks agree). A writer claims a
//! pending episode only when no live lease exists, and the claim bumps `generation`;
//! renewing and committing both require the generation the writer claimed, so a writer
//! whose lease lapsed and was taken over can neither renew nor commit (the *fence*).
//! A unique constraint on `Episodic.uuid`, created with the graph's indices, makes the
//! server itself refuse a second episode node with the same uuid, whoever writes it.
//!
//! ## Why the commit is atomic
//!
//! The commit is **one** `GRAPH.QUERY`. FalkorDB runs a write query under the
//! graph's write lock, so no other query observes it half done, and when any clause
//! fails at run time it rolls back every change the query made (checked by
//! `graph_ingest`'s tests: a failing statement leaves the graph unchanged). Redis
//! appends the command to the AOF as one entry, so a crash either replays all of it or
//! none. The statement starts with the fence — `MATCH` of the pending episode at the
//! claimed generation — and every write hangs off that one row, so a fenced-out writer's
//! query matches nothing and writes nothing. The completion marker (`state =
//! 'complete'`) is set by the same statement.
//!
//! ## Idempotency and concurrency
//!
//! With a caller-supplied uuid ([`AddEpisode::uuid`]) a request can be replayed: an
//! equal, complete episode returns at once without model calls
//! ([`OutcomeStatus::Replayed`]); an equal pending one is resumed; one whose content,
//! source kind, description or reference time differs fails with
//! [`Error::EpisodeConflict`] and writes nothing. Another live writer holding the claim
//! gives [`Error::EpisodeBusy`]; losing the claim mid-way gives [`Error::ClaimLost`].
//!
//! Episodes to one graph are processed one at a time within a process (every clone of
//! an [`Engine`] shares the queue), so two concurrent episodes naming a new "Alice"
//! create one node; episodes to different graphs run in parallel. Across processes the
//! claim keeps one episode from being processed twice, and the commit keeps two
//! processes ingesting *different* episodes at once from creating the same entity
//! twice: it also checks that none of the names the episode creates anew (names no
//! stored entity had when its candidates were read) has appeared since. If one has —
//! another process created it — the statement writes nothing, and the episode is
//! resolved again (extraction and embeddings are kept; resolution may ask its
//! follow-up calls again, which `usage` counts) and now merges into that entity. After
//! three such races in a row the commit goes ahead without the check.

mod details;
mod engine;
mod engine_search;
mod entities;
mod facts;
mod lease;
mod pipeline;
mod retry;
mod triplet;
mod types;
mod work;

pub use engine::{Engine, EngineOptions};
pub use types::{AddEpisode, EpisodeOutcome, IngestUsage, OutcomeStatus};
internal_use!(triplet::{Triplet, TripletEntity, TripletOutcome});
internal_use!(types::{MAX_CONTENT_BYTES, MAX_SOURCE_DESCRIPTION_BYTES, ResumeReport, StepCalls});

use retry::retry_db_step;

#[cfg(doc)]
use crate::Error;
