//! The pipeline of one episode (see the [module documentation](super)): the durable
//! pending write, the claim, the model steps ([`Work`]) and the fenced commit, and the
//! resumption of pending episodes.

use crate::vocab::content::EpisodeFields;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tracing::Instrument;
use uuid::Uuid;

use super::work::{Extracted, Work, embed_texts};
use super::{
    AddEpisode, Engine, EpisodeOutcome, IngestUsage, OutcomeStatus, ResumeReport, lease,
    retry_db_step,
};
use super::{details, entities, facts};
use crate::falkordb::{FalkorDb, physical_graph_name};
use crate::graph::model::{EntityEdge, Episode, EpisodeState, Timestamp};
use crate::graph::store::{self, ingest as st};
use crate::ontology::Ontology;
use crate::{Error, Result};

/// Times an episode is resolved again because another writer created one of its new
/// entities meanwhile; the next commit skips the name check.
const MAX_NAME_RACES: u32 = 3;

impl Engine {
    /// Ingests one episode into `graph` (see the
    /// module documentation for the pipeline, its cost bound and
    /// the replay rules).
    ///
    /// Errors: [`Error::InvalidInput`] for a bad request (nothing written),
    /// [`Error::EpisodeConflict`], [`Error::EpisodeBusy`], [`Error::ClaimLost`], and
    /// model or database failures — after which the episode stays pending, stored and
    /// searchable, for a replay or [`Engine::resume_pending`].
    ///
    /// ```
    /// use gralkor::graph::{AddEpisode, Engine, OutcomeStatus, SourceKind, Timestamp};
    /// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
    /// let engine = Engine::episodes_only(db);
    /// let out = engine
    ///     .add_episode("notes", AddEpisode::new("Alice joined Acme.", SourceKind::Text, Timestamp::now()))
    ///     .await?;
    /// assert_eq!(out.status, OutcomeStatus::Pending);
    /// # Ok(()) }
    /// ```
    pub async fn add_episode(&self, graph: &str, request: AddEpisode) -> Result<EpisodeOutcome> {
        request.validate()?;
        physical_graph_name(graph)?;
        let started = std::time::Instant::now();
        let db = self.db();
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        let span = tracing::info_span!("add_episode", graph, uuid = tracing::field::Empty);
        // Every request the episode sends, whoever sends it (its steps, their retries,
        // the index preparation, the lease renewals), is counted here.
        let trips = Arc::new(AtomicU32::new(0));
        let work = async {
            let mut usage = IngestUsage::default();
            self.build_indices(graph).await?;
            let episode = Episode {
                uuid: request.uuid.unwrap_or_else(Uuid::new_v4),
                content: request.content.clone(),
                source: request.source,
                source_description: request.source_description.clone(),
                valid_at: request.reference_time,
                created_at: Timestamp::now(),
                entity_edges: Vec::new(),
                state: EpisodeState::Pending,
                writer: request.writer.clone(),
                session: request.session.clone(),
            };
            tracing::Span::current().record("uuid", tracing::field::display(episode.uuid));
            // Without a language model the episode is embedded before it is written
            // (with one, extraction embeds it with its names and facts, in the same
            // request): one embedding request either way.
            // Without one the content is embedded in passages (`store::episode_passages`):
            // the first is written with the episode, the rest after it.
            let mut passages = match self.embedder() {
                Some(embedder) if !self.extracts() => {
                    let texts = store::episode_passages(&episode.content);
                    embed_texts(embedder.as_ref(), &texts, &mut usage).await?
                }
                _ => Vec::new(),
            };
            let embedding = (!passages.is_empty()).then(|| passages.remove(0));
            // The write, and for an extracting engine the claim and the extraction's
            // context too, in one round trip.
            let opts = &self.inner.options;
            let lease_ms = i64::try_from(opts.lease.as_millis()).unwrap_or(i64::MAX);
            let claim_as = self
                .extracts()
                .then_some((self.inner.writer.as_str(), lease_ms));
            let opened = retry_db_step("write_pending", || {
                st::open_episode(
                    db,
                    graph,
                    &episode,
                    embedding.as_deref(),
                    claim_as,
                    opts.previous_episodes,
                    super::work::KNOWN_FACTS,
                )
            })
            .await?;
            let (stored, created) = (opened.stored, opened.created);
            if !created {
                same_episode(&stored, &episode)?;
                match stored.state {
                    EpisodeState::Complete => return replayed(db, graph, stored, usage).await,
                    EpisodeState::Quarantined => {
                        return Err(Error::EpisodeQuarantined {
                            uuid: stored.uuid,
                            unanswered: st::MAX_UNANSWERED_COMMITS,
                        });
                    }
                    _ => {}
                }
            }
            if !self.extracts() {
                if !passages.is_empty() {
                    // Passages 1… (idempotent: a replay writes nothing new).
                    let uuid = stored.uuid;
                    retry_db_step("write_passages", || {
                        store::write_passages(db, graph, uuid, &passages)
                    })
                    .await?;
                }
                return Ok(EpisodeOutcome {
                    episode: stored,
                    status: OutcomeStatus::Pending,
                    entities: Vec::new(),
                    facts: Vec::new(),
                    invalidated: Vec::new(),
                    usage,
                });
            }
            let opened = opened
                .claim
                .map(|claim| (claim, (opened.previous, opened.known)));
            self.process(graph, stored, &request, usage, opened).await
        }
        .instrument(span);
        crate::falkordb::count_round_trips(trips.clone(), Box::pin(work))
            .await
            .map(|mut outcome| {
                outcome.usage.elapsed = started.elapsed();
                outcome.usage.db_round_trips = trips.load(Ordering::Relaxed);
                outcome
            })
    }

    /// Finishes every pending episode of `graph`, oldest reference time first, with
    /// `ontology` (the generic one when `None`). Episodes another live writer holds are
    /// reported busy; failures are reported per episode and leave it pending.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let report = engine.resume_pending("notes", None).await?;
    /// println!("{} finished, {} failed", report.completed.len(), report.failed.len());
    /// # Ok(()) }
    /// ```
    pub async fn resume_pending(
        &self,
        graph: &str,
        ontology: Option<&Ontology>,
    ) -> Result<ResumeReport> {
        self.resume_pending_by_writer(graph, &|_| ontology.cloned())
            .await
    }

    /// [`Engine::resume_pending`] with each episode's ontology chosen by its writer
    /// key ([`Episode::writer`](crate::graph::Episode::writer); `None` for an
    /// unattributed episode): `ontology_for` returns the ontology to extract with (the
    /// generic one when `None`), so each Lens's episodes are extracted as that Lens
    /// would have.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let report = engine.resume_pending_by_writer("notes", &|_writer| None).await?;
    /// println!("{} finished", report.completed.len());
    /// # Ok(()) }
    /// ```
    pub async fn resume_pending_by_writer(
        &self,
        graph: &str,
        ontology_for: &(dyn Fn(Option<&str>) -> Option<Ontology> + Send + Sync),
    ) -> Result<ResumeReport> {
        physical_graph_name(graph)?;
        let db = self.db();
        if !self.extracts() {
            return Err(Error::config(
                "language model",
                "is required to finish pending episodes: this engine stores episodes only",
            ));
        }
        let mut report = ResumeReport::default();
        let pending = st::episodes_in(db, graph, EpisodeState::Pending).await?;
        if !pending.is_empty() {
            // Episodes stored by an engine without an embedder left the graph without
            // vector indices: prepared as every write prepares it, before extraction
            // writes the vectors they index.
            self.build_indices(graph).await?;
        }
        for uuid in pending {
            let queue = self.queue(graph);
            let _turn = queue.lock().await;
            // Every request for this episode from here on is its round trip.
            let trips = Arc::new(AtomicU32::new(0));
            let read = store::get_episode(db, graph, uuid);
            let Some(episode) = crate::falkordb::count_round_trips(trips.clone(), read).await?
            else {
                continue;
            };
            if episode.state == EpisodeState::Complete {
                continue;
            }
            let mut request =
                AddEpisode::new(episode.content.clone(), episode.source, episode.valid_at)
                    .uuid(uuid)
                    .source_description(episode.source_description.clone());
            request.ontology = ontology_for(episode.writer.as_deref());
            request.writer = episode.writer.clone();
            request.session = episode.session.clone();
            let usage = IngestUsage::default();
            let started = std::time::Instant::now();
            let processed = crate::falkordb::count_round_trips(
                trips.clone(),
                self.process(graph, episode, &request, usage, None),
            );
            match processed.await {
                Ok(mut outcome) => {
                    outcome.usage.elapsed = started.elapsed();
                    outcome.usage.db_round_trips = trips.load(Ordering::Relaxed);
                    report.completed.push(outcome);
                }
                Err(Error::EpisodeBusy { uuid }) => report.busy.push(uuid),
                Err(e) => report.failed.push((uuid, e)),
            }
        }
        report.quarantined = st::episodes_in(db, graph, EpisodeState::Quarantined).await?;
        Ok(report)
    }

    /// Rebuilds the entity or fact vector index of `graph` once a commit leaves it
    /// with [`EngineOptions::vector_rebuild_threshold`] stale entries or more. The
    /// episode is committed either way: a failed rebuild is logged, and the next
    /// commit tries again.
    async fn purge_stale_vectors(&self, graph: &str, stale: st::Stale) {
        let db = self.db();
        let threshold = self.inner.options.vector_rebuild_threshold;
        for (index, count) in [
            (store::VectorIndex::Entity, stale.entity),
            (store::VectorIndex::Fact, stale.fact),
        ] {
            if count > 0
                && count >= threshold
                && let Err(e) = store::rebuild_vector_index(db, graph, index).await
            {
                tracing::warn!(graph, ?index, error = %e, "rebuilding a vector index failed");
            }
        }
    }

    /// Claims a pending episode (unless `opened` holds the claim made with its write,
    /// and the extraction's context), runs the model steps and commits.
    async fn process(
        &self,
        graph: &str,
        episode: Episode,
        request: &AddEpisode,
        mut usage: IngestUsage,
        opened: Option<(st::Claim, super::work::Context)>,
    ) -> Result<EpisodeOutcome> {
        let (llm, embedder) = self.models()?;
        let db = self.db();
        let opts = &self.inner.options;
        let lease_ms = i64::try_from(opts.lease.as_millis()).unwrap_or(i64::MAX);
        let (claim, previous) = match opened {
            Some((claim, previous)) => (claim, Some(previous)),
            None => {
                let claim = retry_db_step("claim", || {
                    st::claim(db, graph, episode.uuid, &self.inner.writer, lease_ms)
                })
                .await?;
                (claim, None)
            }
        };
        let generation = match claim {
            st::Claim::Held(g) => g,
            st::Claim::Complete => {
                let stored = store::get_episode(db, graph, episode.uuid)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("episode {}", episode.uuid)))?;
                return replayed(db, graph, stored, usage).await;
            }
            st::Claim::Busy => return Err(Error::EpisodeBusy { uuid: episode.uuid }),
            st::Claim::Quarantined => {
                return Err(Error::EpisodeQuarantined {
                    uuid: episode.uuid,
                    unanswered: st::MAX_UNANSWERED_COMMITS,
                });
            }
            st::Claim::Missing => {
                return Err(Error::NotFound(format!("episode {}", episode.uuid)));
            }
        };
        let lease = lease::Lease::hold(db, graph, episode.uuid, generation, opts.lease);
        let ontology = request.ontology.clone().unwrap_or_else(Ontology::generic);
        let work = Work {
            db,
            graph,
            llm,
            embedder,
            opts,
            ontology: &ontology,
            lease: &lease,
        };
        // Extraction and embeddings once; resolution again (at most
        // `MAX_NAME_RACES` times) when another process created one of the episode's
        // new entities while this one was resolving — the commit's name check finds
        // that and writes nothing.
        let outcome: Result<Done> = async {
            let extracted = work.extract(&episode, request, previous, &mut usage).await?;
            let mut attempt = 0;
            loop {
                let mut done = resolve(&work, &episode, &extracted, &mut usage).await?;
                work.check_lease(episode.uuid)?;
                if attempt == MAX_NAME_RACES {
                    // Progress over purity: a writer that keeps losing the race commits.
                    done.set.fresh_keys.clear();
                }
                let committed = retry_db_step("commit", || async {
                    let uuid = episode.uuid;
                    match st::begin_commit(db, graph, uuid, generation).await? {
                        st::BeginCommit::Go => {}
                        st::BeginCommit::Quarantined(unanswered) => {
                            tracing::error!(
                                episode = %uuid,
                                unanswered,
                                "the server was lost during every commit of this episode; \
                                 quarantined"
                            );
                            return Err(Error::EpisodeQuarantined { uuid, unanswered });
                        }
                        st::BeginCommit::NotHeld(outcome) => return Ok(outcome),
                    }
                    let sent = st::commit_episode(db, graph, uuid, generation, &done.set)
                        .instrument(tracing::info_span!("commit_statement"))
                        .await;
                    match sent {
                        Ok(Some(stale)) => Ok(st::Committed::Done(stale)),
                        // Unanswered: it stays counted (the next `begin_commit` sees it).
                        Err(e @ Error::Connection { .. }) => Err(e),
                        Err(e) => {
                                    let _ = st::commit_answered(db, graph, uuid, generation).await;
                            Err(e)
                        }
                        // Nothing written: a fresh name taken, or a lost reply.
                        Ok(None) => {
                                    st::commit_answered(db, graph, uuid, generation).await
                        }
                    }
                })
                .instrument(tracing::info_span!("commit", attempt))
                .await;
                let committed = committed?;
                match committed {
                    st::Committed::Done(stale) => {
                        self.purge_stale_vectors(graph, stale).await;
                        return Ok(done);
                    }
                    st::Committed::Fenced => return Err(Error::ClaimLost { uuid: episode.uuid }),
                    // Without the name check nothing can stop the statement: never loop.
                    st::Committed::NameTaken if done.set.fresh_keys.is_empty() => {
                        return Err(Error::Protocol(format!(
                            "the commit of episode {} wrote nothing, yet the episode is \
                             still claimed by this writer",
                            episode.uuid
                        )));
                    }
                    st::Committed::NameTaken => {
                        tracing::info!(
                            episode = %episode.uuid,
                            names = ?done.set.fresh_keys,
                            "another writer created one of this episode's new entities; resolving again"
                        );
                        attempt += 1;
                    }
                }
            }
        }
        .await;
        drop(lease);
        let done = match outcome {
            Ok(done) => done,
            Err(e) => {
                if !matches!(e, Error::ClaimLost { .. }) {
                    // Best effort: let a retry take the episode at once.
                    let _ = st::release(db, graph, episode.uuid, generation).await;
                }
                return Err(e);
            }
        };
        let mut stored = episode;
        stored.state = EpisodeState::Complete;
        stored.entity_edges = done.set.entity_edges.clone();
        Ok(EpisodeOutcome {
            episode: stored,
            status: OutcomeStatus::Completed,
            entities: done.set.entities,
            facts: done.facts,
            invalidated: done.invalidated,
            usage,
        })
    }
}

/// What the model steps produced: the commit, and the outcome's fact lists.
struct Done {
    set: st::CommitSet,
    facts: Vec<EntityEdge>,
    invalidated: Vec<EntityEdge>,
}

/// Entity and fact resolution, details, and the commit set.
async fn resolve(
    work: &Work<'_>,
    episode: &Episode,
    extracted: &Extracted,
    usage: &mut IngestUsage,
) -> Result<Done> {
    let Extracted {
        extraction,
        known,
        verdicts,
        name_vectors,
        fact_vectors,
        episode_vector,
    } = extracted;
    let resolved = entities::resolve(work, &extraction.entities, name_vectors.clone(), usage)
        .instrument(tracing::info_span!("resolve_entities"))
        .await?;
    work.check_lease(episode.uuid)?;
    let facts = facts::resolve(
        work,
        episode,
        &extraction.facts,
        fact_vectors.clone(),
        &resolved,
        (known, verdicts),
        usage,
    )
    .instrument(tracing::info_span!("resolve_facts"))
    .await?;
    work.check_lease(episode.uuid)?;
    let mut nodes = resolved.nodes;
    details::fill(work, &mut nodes, &resolved.is_new, &facts.new_facts, usage)
        .instrument(tracing::info_span!("details"))
        .await?;
    work.check_lease(episode.uuid)?;

    let mut entity_edges: Vec<Uuid> = facts.new_facts.iter().map(|f| f.uuid).collect();
    entity_edges.extend(facts.confirmed.iter().map(|f| f.uuid));
    let mut outcome_facts = facts.new_facts.clone();
    outcome_facts.extend(facts.confirmed.iter().cloned());
    Ok(Done {
        set: st::CommitSet {
            mentions: nodes.iter().map(|n| n.uuid).collect(),
            entities: nodes,
            new_facts: facts.new_facts,
            updated_facts: facts.updates,
            entity_edges,
            fresh_keys: resolved.fresh_keys,
            episode_embedding: Some(episode_vector.clone()),
        },
        facts: outcome_facts,
        invalidated: facts.invalidated,
    })
}

/// Checks a replay against the stored episode's immutable fields.
fn same_episode(stored: &Episode, asked: &Episode) -> Result<()> {
    fn fields(e: &Episode) -> EpisodeFields<'_> {
        EpisodeFields {
            content: &e.content,
            source: e.source,
            description: &e.source_description,
            valid_at: Some(e.valid_at),
        }
    }
    let Some(field) = fields(stored).first_difference(&fields(asked)) else {
        return Ok(());
    };
    Err(Error::EpisodeConflict {
        uuid: stored.uuid,
        field,
    })
}

/// The outcome of replaying a complete episode: what it mentions and produced, as
/// stored now.
async fn replayed(
    db: &FalkorDb,
    graph: &str,
    episode: Episode,
    usage: IngestUsage,
) -> Result<EpisodeOutcome> {
    let entities = store::get_mentioned_entities(db, graph, episode.uuid).await?;
    let facts = store::get_facts(db, graph, &episode.entity_edges).await?;
    Ok(EpisodeOutcome {
        episode,
        status: OutcomeStatus::Replayed,
        entities,
        facts,
        invalidated: Vec::new(),
        usage,
    })
}
