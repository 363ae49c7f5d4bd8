//! [`Client::reflect`]: submitting a Reflection invocation; production, delivery,
//! retries and the one callback run in the background, owned by the client. With an
//! authorizer, the invocation's subject is authorized like every write: `contribute`
//! on the Reflection's Destination when it is submitted and again when its artefact
//! is delivered (the fragment is recorded then, so the artefact can be forgotten),
//! and its related-memory search runs as the subject.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

use super::Client;
use super::memory::MemoryClient;
use super::request::Search;
use crate::access::{ObjectRef, RelationshipFilter, Subject};
use crate::llm::LanguageModel;
use crate::reflection::delivery::{
    Clock, Completion, Outcome, RetrySchedule, Stage, Stop, SystemClock, deliver, stored_artefact,
};
use crate::reflection::runner::{
    DEFAULT_MAX_TOOL_ROUNDS, Inference, Invocation, ModelInference, Runner, ToolExecutor, ToolSpec,
};
use crate::reflection::{Reflection, packaged};
use crate::runtime::Snapshot;
use crate::storage::{Artefact, GraphId, Hit, MAX_NAME_BYTES, Storage};
use crate::{Error, Result};

/// What an invocation calls, exactly once, when it ends (see
/// [`ReflectOptions::on_complete`]).
pub type ReflectCallback = Box<dyn FnOnce(Completion) + Send + 'static>;

/// The options of one [`Client::reflect`] submission: the completion callback, host
/// tools and their executor, the host tool context, and the injectable inference,
/// model, clock, retry schedule and tool-round bound. Only these exist; each is
/// checked when the invocation is submitted.
pub struct ReflectOptions {
    on_complete: Mutex<Option<ReflectCallback>>,
    tools: Vec<ToolSpec>,
    executor: Option<Arc<dyn ToolExecutor>>,
    tool_context: Value,
    inference: Option<Arc<dyn Inference>>,
    model: Option<Arc<dyn LanguageModel>>,
    clock: Arc<dyn Clock>,
    schedule: RetrySchedule,
    max_tool_rounds: usize,
}

impl std::fmt::Debug for ReflectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let calls_back = self
            .on_complete
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        f.debug_struct("ReflectOptions")
            .field("on_complete", &calls_back)
            .field("tools", &self.tools)
            .field("executor", &self.executor)
            .field("tool_context", &self.tool_context)
            .field("inference", &self.inference)
            .field("model", &self.model)
            .field("clock", &self.clock)
            .field("schedule", &self.schedule)
            .field("max_tool_rounds", &self.max_tool_rounds)
            .finish()
    }
}

impl Default for ReflectOptions {
    fn default() -> Self {
        ReflectOptions {
            on_complete: Mutex::new(None),
            tools: Vec::new(),
            executor: None,
            tool_context: Value::Object(Map::new()),
            inference: None,
            model: None,
            clock: Arc::new(SystemClock::default()),
            schedule: RetrySchedule::default(),
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
        }
    }
}

impl ReflectOptions {
    /// No callback; no tools; the client's language model
    /// ([`MemoryClient::language_model`](super::MemoryClient::language_model)); the
    /// real clock; the default schedule.
    pub fn new() -> ReflectOptions {
        ReflectOptions::default()
    }

    /// Calls `callback` exactly once with the invocation's [`Completion`] when it
    /// ends (not when the client shuts down first). Without one, the outcome is
    /// only logged; [`Client::await_reflections`] still waits for it.
    pub fn on_complete(self, callback: impl FnOnce(Completion) + Send + 'static) -> Self {
        *self.on_complete.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(callback));
        self
    }

    /// Host tools, run by `executor`.
    pub fn tools(mut self, tools: Vec<ToolSpec>, executor: Arc<dyn ToolExecutor>) -> Self {
        self.tools = tools;
        self.executor = Some(executor);
        self
    }

    /// The host tool context (a JSON object; its `operator_id` is forced from the
    /// invocation).
    pub fn tool_context(mut self, context: Value) -> Self {
        self.tool_context = context;
        self
    }

    /// Answers steps with this inference instead of a model.
    pub fn inference(mut self, inference: Arc<dyn Inference>) -> Self {
        self.inference = Some(inference);
        self
    }

    /// Answers steps with this model ([`ModelInference`]) instead of the client's.
    pub fn model(mut self, model: Arc<dyn LanguageModel>) -> Self {
        self.model = Some(model);
        self
    }

    internal_item!(
        /// The clock the retry schedule sleeps on.
        #[cfg(any(test, feature = "testing"))]
        pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
            self.clock = clock;
            self
        }
    );

    /// The retry schedule (default: 1 s doubling to 1 h within 24 h).
    pub fn schedule(mut self, schedule: RetrySchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// At most `rounds` tool rounds per step.
    pub fn max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds;
        self
    }

    /// Options written as JSON, for hosts that pass them through: only
    /// `tool_context` (an object) and `max_tool_rounds` (a positive integer) can be
    /// written so (tools, inference, models and clocks are Rust values); any other key
    /// is an error naming every unsupported one.
    ///
    /// ```
    /// use gralkor::client::ReflectOptions;
    /// use serde_json::json;
    ///
    /// ReflectOptions::from_json(&json!({"tool_context": {"tenant": "t1"}, "max_tool_rounds": 3}))?;
    /// let err = ReflectOptions::from_json(&json!({"retries": 9, "schedule": "x"})).unwrap_err();
    /// assert!(err.to_string().contains("unsupported reflection options: retries, schedule"));
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn from_json(options: &Value) -> Result<ReflectOptions> {
        let map = options
            .as_object()
            .ok_or_else(|| Error::invalid("options", "must be a JSON object"))?;
        let unsupported: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !["tool_context", "max_tool_rounds"].contains(k))
            .collect();
        if !unsupported.is_empty() {
            return Err(Error::invalid(
                "options",
                format!(
                    "has unsupported reflection options: {} (supported: tool_context, max_tool_rounds)",
                    unsupported.join(", ")
                ),
            ));
        }
        let mut o = ReflectOptions::new();
        if let Some(c) = map.get("tool_context") {
            o.tool_context = c.clone();
        }
        if let Some(r) = map.get("max_tool_rounds") {
            o.max_tool_rounds = r
                .as_u64()
                .and_then(|r| usize::try_from(r).ok())
                .ok_or_else(|| {
                    Error::invalid("options.max_tool_rounds", "must be a positive integer")
                })?;
        }
        o.check()?;
        Ok(o)
    }

    fn check(&self) -> Result<()> {
        if !self.tool_context.is_object() {
            return Err(Error::invalid(
                "options.tool_context",
                "must be a JSON object",
            ));
        }
        if self.max_tool_rounds == 0 {
            return Err(Error::invalid(
                "options.max_tool_rounds",
                "must be at least 1",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, t) in self.tools.iter().enumerate() {
            if t.name.trim().is_empty() {
                return Err(Error::invalid(
                    format!("options.tools[{i}].name"),
                    "must not be blank",
                ));
            }
            if !seen.insert(t.name.as_str()) {
                return Err(Error::invalid(
                    format!("options.tools[{i}].name"),
                    format!("`{}` is offered twice", t.name),
                ));
            }
        }
        Ok(())
    }
}

/// The admitted Reflection work a client owns: stopped, without callbacks, when the
/// client shuts down.
#[derive(Debug)]
pub(crate) struct Work {
    tasks: Mutex<JoinSet<()>>,
    /// How many admitted invocations have not finished (a task that is aborted
    /// counts as finished when it is dropped).
    active: tokio::sync::watch::Sender<usize>,
}

impl Default for Work {
    fn default() -> Self {
        Work {
            tasks: Mutex::new(JoinSet::new()),
            active: tokio::sync::watch::channel(0).0,
        }
    }
}

/// Counts one invocation as finished when dropped (completed or aborted).
struct Finished(tokio::sync::watch::Sender<usize>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Work {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.active.send_modify(|n| *n += 1);
        let finished = Finished(self.active.clone());
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        // Forget finished tasks so the set does not grow.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let _finished = finished;
            task.await;
        });
    }

    /// Ends every unfinished invocation; none of them calls back.
    pub(crate) fn stop(&self) {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .abort_all();
    }

    /// Waits for every admitted invocation to finish.
    async fn drain(&self) {
        let mut rx = self.active.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// The related-memory query of `generalisations` keeps at most this many bytes of the
/// representations' content.
const RELATED_QUERY_BYTES: usize = 8 * 1024;

/// What a Reflection submission resolved to once admitted.
pub(super) struct Admitted {
    reflection: Reflection,
    inference: Arc<dyn Inference>,
    graph: GraphId,
}

impl<S: Storage> MemoryClient<S> {
    /// [`Client::reflect`]: checks, authorizes at submission, and spawns the work.
    pub(super) async fn submit_reflection(
        &self,
        name: &str,
        invocation: Invocation,
        options: ReflectOptions,
    ) -> Result<String> {
        self.open_for_reflect()?;
        let snapshot = self.runtime().snapshot();
        let Admitted {
            reflection,
            inference,
            graph,
        } = self.admit_reflection(&snapshot, name, &invocation, &options)?;
        // Authorized like every write, before the id is answered: a refusal runs
        // nothing.
        self.authorize_write(invocation.subject.as_ref(), &invocation.operator, &graph)
            .instrument(tracing::info_span!(
                "gralkor.reflect.authorize",
                graph = graph.as_str()
            ))
            .await?;
        let mut runner = Runner::new(inference)
            .tool_context(options.tool_context.clone())
            .max_tool_rounds(options.max_tool_rounds);
        if let Some(executor) = &options.executor {
            runner = runner.tools(options.tools.clone(), executor.clone());
        }
        let callback = options
            .on_complete
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let id = invocation.id.clone();
        let client = self.clone();
        let span = tracing::info_span!(
            "gralkor.reflect",
            reflection = reflection.name(),
            invocation = id.as_str()
        );
        let task = async move {
            let outcome = client
                .produce_and_deliver(
                    &snapshot,
                    &reflection,
                    &invocation,
                    &graph,
                    &runner,
                    &options,
                )
                .await;
            match &outcome {
                Outcome::Delivered { artefact } => {
                    tracing::info!(artefact = artefact.id.as_str(), "reflection delivered")
                }
                other => tracing::warn!(outcome = ?other, "reflection did not deliver"),
            }
            if !client.is_closed()
                && let Some(callback) = callback
            {
                callback(Completion::new(invocation.id.clone(), outcome));
            }
        }
        .instrument(span);
        self.reflections().spawn(task);
        Ok(id)
    }

    /// The checks a submission passes before anything runs (the twin runs them too,
    /// before it records the call): the invocation id, the Reflection, the options and
    /// the model to answer with, and the Destination's graph for the operator.
    pub(super) fn admit_reflection(
        &self,
        snapshot: &Snapshot,
        name: &str,
        invocation: &Invocation,
        options: &ReflectOptions,
    ) -> Result<Admitted> {
        if invocation.id.trim().is_empty() {
            return Err(Error::invalid("invocation.id", "must not be blank"));
        }
        if invocation.id.contains('\0') {
            return Err(Error::invalid(
                "invocation.id",
                "must not contain NUL characters",
            ));
        }
        if invocation.id.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(
                "invocation.id",
                format!("must be at most {MAX_NAME_BYTES} bytes"),
            ));
        }
        let reflection: Reflection = match packaged::find(name) {
            Some(r) => r,
            None => snapshot.reflection("name", name)?.clone(),
        };
        options.check()?;
        let inference: Arc<dyn Inference> = match (&options.inference, &options.model) {
            (Some(i), _) => i.clone(),
            (None, Some(m)) => Arc::new(ModelInference::new(m.clone())),
            (None, None) => match self.language_model() {
                Some(m) => Arc::new(ModelInference::new(m)),
                None => {
                    return Err(Error::invalid(
                        "options.inference",
                        "is required: this client has no language model; give \
                         ReflectOptions::model or ReflectOptions::inference",
                    ));
                }
            },
        };
        let destination =
            snapshot.destination("reflection.destination", reflection.destination())?;
        let graph = destination.graph_id(&invocation.operator)?;
        Ok(Admitted {
            reflection,
            inference,
            graph,
        })
    }

    /// [`Client::await_reflections`].
    pub(super) async fn drain_reflections(&self) {
        self.reflections().drain().await;
    }

    fn open_for_reflect(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed {
                what: "this memory client".into(),
            });
        }
        Ok(())
    }

    async fn produce_and_deliver(
        &self,
        snapshot: &Snapshot,
        reflection: &Reflection,
        invocation: &Invocation,
        graph: &GraphId,
        runner: &Runner,
        options: &ReflectOptions,
    ) -> Outcome {
        let clock = options.clock.as_ref();
        let schedule = options.schedule;
        let storage = self.storage();
        let id = crate::reflection::artefact_id(
            invocation.operator.as_str(),
            &invocation.id,
            reflection.name(),
        );
        // An artefact stored by an earlier submission is delivered again (confirming
        // it, or resuming its extraction) without running the chain of thought.
        let stored = schedule
            .run(clock, || stored_artefact(storage, graph, &id))
            .await;
        let (artefact, produced_now) = match stored {
            Ok(Some(a)) => (a, false),
            Err(Stop::Abandoned(e) | Stop::Failed(e)) => {
                return Outcome::Abandoned {
                    stage: Stage::Delivery,
                    reason: e.to_string(),
                    artefact: None,
                };
            }
            Ok(None) => {
                let produced = schedule
                    .run(clock, || async {
                        let related = if reflection.name() == packaged::GENERALISATIONS {
                            Some(self.related_memory(snapshot, invocation).await?)
                        } else {
                            None
                        };
                        runner.run(reflection, invocation, related).await
                    })
                    .await;
                match produced {
                    Ok(a) => (a, true),
                    Err(Stop::Abandoned(e)) => {
                        return Outcome::Abandoned {
                            stage: Stage::Production,
                            reason: e.to_string(),
                            artefact: None,
                        };
                    }
                    Err(Stop::Failed(e)) => {
                        return Outcome::ProductionFailed {
                            reason: e.to_string(),
                        };
                    }
                }
            }
        };
        let delivered = schedule
            .run(clock, || {
                self.deliver_as_subject(graph, reflection, invocation, &artefact, produced_now)
            })
            .await;
        match delivered {
            Ok(()) => Outcome::Delivered { artefact },
            Err(Stop::Abandoned(e) | Stop::Failed(e)) => Outcome::Abandoned {
                stage: Stage::Delivery,
                reason: e.to_string(),
                artefact: Some(artefact),
            },
        }
    }

    /// One delivery attempt through the guarded write: the subject is authorized
    /// again (permission may have been revoked since submission: a refusal is not
    /// retried and writes nothing), the artefact is written create-or-confirm, and
    /// its fragment is recorded for the subject. An artefact an earlier submission
    /// stored keeps the fragment it has; one is recorded only when it has none (the
    /// earlier submission ended between the write and the record).
    async fn deliver_as_subject(
        &self,
        graph: &GraphId,
        reflection: &Reflection,
        invocation: &Invocation,
        artefact: &Artefact,
        produced_now: bool,
    ) -> Result<()> {
        let subject = invocation.subject.as_ref();
        self.authorize_write(subject, &invocation.operator, graph)
            .await?;
        deliver(self.storage(), graph, reflection, artefact).await?;
        let uuid = Uuid::parse_str(&artefact.id)
            .map_err(|_| Error::invalid("artefact.id", "must be a UUID (see artefact_id)"))?;
        if produced_now || !self.fragment_recorded(uuid).await? {
            self.record_write(subject, graph, [uuid]).await?;
        }
        Ok(())
    }

    /// Whether the authorizer holds a fragment for episode `uuid` (always, without
    /// an authorizer: nothing is recorded then).
    async fn fragment_recorded(&self, uuid: Uuid) -> Result<bool> {
        match self.authorizer() {
            Some(authorizer) => Ok(!authorizer
                .read_relationships(&RelationshipFilter::resource(ObjectRef::fragment(uuid)))
                .await?
                .is_empty()),
            None => Ok(true),
        }
    }

    /// The packaged `generalisations` related-memory search: one episode search across
    /// every accessible Destination, its query built from the representations;
    /// Lens-authored observations and prior generalisation artefacts come back apart.
    async fn related_memory(&self, snapshot: &Snapshot, invocation: &Invocation) -> Result<Value> {
        let query: String = invocation
            .representations
            .iter()
            .map(|r| r.content.encoded())
            .collect::<Vec<_>>()
            .join("\n");
        if query.trim().is_empty() {
            return Ok(json!({"observations": [], "prior_generalisations": []}));
        }
        let mut query = query;
        let max = RELATED_QUERY_BYTES;
        if query.len() > max {
            let mut end = max;
            while !query.is_char_boundary(end) {
                end -= 1;
            }
            query.truncate(end);
        }
        // Runs as the invocation's subject: it sees only what the subject may see.
        let mut search = Search::new(&invocation.operator, query);
        if let Some(subject) = &invocation.subject {
            search = search.subject(Subject::clone(subject));
        }
        let found = self.search_with(snapshot, &search).await?;
        let mut observations = Vec::new();
        let mut priors: Vec<Artefact> = Vec::new();
        for r in found {
            if let Hit::Episode(e) = r.hit {
                match &e.writer {
                    Some(crate::provenance::Writer::Lens(lens)) => observations.push(json!({
                        "destination": r.destination,
                        "lens": lens,
                        "content": e.content,
                    })),
                    Some(crate::provenance::Writer::Reflection(n))
                        if n == packaged::GENERALISATIONS =>
                    {
                        if let Some(a) = crate::reflection::delivery::parse_artefact(&e.content) {
                            priors.push(a);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(json!({"observations": observations, "prior_generalisations": priors}))
    }
}
