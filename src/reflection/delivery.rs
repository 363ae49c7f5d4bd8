//! Delivery of artefacts, the retry schedule and the terminal outcomes.
//!
//! * [`RetrySchedule`]: a failure is retried iff it is *retryable*
//!   (`classify`): an HTTP-like 5xx status is found in the error (a provider's
//!   status, also inside a chain of causes), or it is a transient transport or
//!   database fault (a dropped connection, a timeout, a busy or lost episode claim),
//!   which gralkor treats like a 503 so no artefact is lost. The delay starts at 1 s,
//!   doubles, is capped at 1 h, and another attempt is made only while
//!   `elapsed + next delay ≤ 24 h`, measured from the first failure (a
//!   configuration of the crate's one retry policy in `src/retry.rs`). A 4xx status is
//!   abandoned at once; any other failure ends the stage (production: a
//!   [`Outcome::ProductionFailed`]; delivery: abandoned).
//! * `Clock`: time and sleep, injectable; `ManualClock` is the test double
//!   whose sleeps advance it at once.
//! * `deliver`: create-or-confirm of an artefact by id through the storage's
//!   claimed, fenced, completion-marked episode write: the episode's uuid is the
//!   artefact id, its body `{"id", "payload"}` (a structured record), its source
//!   description exactly `reflection:<name>`, extracted with the output's ontology.
//!   Equal content confirms without extraction; different content is an
//!   [`Error::ArtefactConflict`]; an equal episode whose extraction did not finish
//!   resumes it. `stored_artefact` reads an artefact back by id, so a resubmission
//!   delivers what was produced before without running the chain of thought again.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
#[cfg(any(test, feature = "testing"))]
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Reflection;
use crate::provenance::Writer;
use crate::storage::{Artefact, Content, GraphId, NewEpisode, Storage};
use crate::{Error, Result};

/// Which stage of an invocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Running the chain of thought (and, for `generalisations`, the related-memory
    /// search before it).
    Production,
    /// Writing the artefact to its Destination.
    Delivery,
}

/// The terminal outcome of one invocation, reported exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The artefact is stored (created, confirmed or resumed).
    Delivered {
        /// The artefact.
        artefact: Artefact,
    },
    /// Production failed for a reason retrying cannot help.
    ProductionFailed {
        /// Why.
        reason: String,
    },
    /// A stage gave up: a 4xx, the 24-hour window closed, or (delivery) a failure
    /// that is not retryable.
    Abandoned {
        /// The stage.
        stage: Stage,
        /// Why.
        reason: String,
        /// The produced artefact, when delivery was abandoned (no error artefact is
        /// written).
        artefact: Option<Artefact>,
    },
}

/// What the invocation callback receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Completion {
    /// The invocation id.
    pub invocation_id: String,
    /// How it ended.
    pub outcome: Outcome,
}

impl Completion {
    /// A completion.
    pub fn new(invocation_id: impl Into<String>, outcome: Outcome) -> Completion {
        Completion {
            invocation_id: invocation_id.into(),
            outcome,
        }
    }
}

internal_item!(
    /// A boxed future of a sleep.
    pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;
);

internal_item!(
    /// Time for the retry schedule: a monotonic "now" and a sleep.
    pub trait Clock: Send + Sync + fmt::Debug {
        /// Time since some fixed point (monotonic).
        fn now(&self) -> Duration;
        /// Waits `d`.
        fn sleep(&self, d: Duration) -> Sleep;
    }
);

internal_item!(
    /// The real clock (tokio's time).
    #[derive(Debug, Clone)]
    pub struct SystemClock {
        start: tokio::time::Instant,
    }
);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }
}

internal_item!(
    #[cfg(any(test, feature = "testing"))]
    /// A **test double** [`Clock`]: sleeping advances it at once and is recorded.
    /// Clones share the time and the record.
    #[derive(Debug, Clone, Default)]
    pub struct ManualClock {
        state: Arc<Mutex<(Duration, Vec<Duration>)>>,
    }
);

#[cfg(any(test, feature = "testing"))]
impl ManualClock {
    /// A clock at zero.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves time forward by `d` (time spent working).
    pub fn advance(&self, d: Duration) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0 += d;
    }

    /// Every sleep so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }
}

#[cfg(any(test, feature = "testing"))]
impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    fn sleep(&self, d: Duration) -> Sleep {
        {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.0 += d;
            s.1.push(d);
        }
        Box::pin(std::future::ready(()))
    }
}

/// How a failure is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Try again (a 5xx or a transient fault).
    Retry,
    /// Give up at once (a 4xx).
    Abandon,
    /// Not a status failure: production fails, delivery is abandoned.
    Fail,
}

/// The HTTP-like status in `error`: a provider's status, looked for through the
/// chain of causes too.
pub(crate) fn http_status(error: &Error) -> Option<u16> {
    if let Error::Provider {
        status: Some(s), ..
    } = error
    {
        return Some(*s);
    }
    let mut cause = std::error::Error::source(error);
    while let Some(c) = cause {
        if let Some(Error::Provider {
            status: Some(s), ..
        }) = c.downcast_ref::<Error>()
        {
            return Some(*s);
        }
        cause = c.source();
    }
    None
}

/// Classifies a failure for the retry schedule (see the module documentation).
pub(crate) fn classify(error: &Error) -> Class {
    match http_status(error) {
        Some(s) if (500..600).contains(&s) => Class::Retry,
        Some(s) if (400..500).contains(&s) => Class::Abandon,
        Some(_) => Class::Fail,
        None => match error {
            Error::Connection { .. }
            | Error::Timeout { .. }
            | Error::EpisodeBusy { .. }
            | Error::ClaimLost { .. }
            | Error::Provider { status: None, .. } => Class::Retry,
            _ => Class::Fail,
        },
    }
}

/// The backoff: from `first_delay`, doubling, capped at `max_delay`, attempted only
/// while `elapsed + next delay ≤ window` from the first failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The first delay (1 s).
    pub first_delay: Duration,
    /// The largest delay (1 h).
    pub max_delay: Duration,
    /// How long after the first failure attempts may still start (24 h).
    pub window: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        RetrySchedule {
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(3600),
            window: Duration::from_secs(24 * 3600),
        }
    }
}

/// Why a retried operation stopped.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Abandoned: a 4xx, or the window closed on retryable failures.
    Abandoned(Error),
    /// A failure that is not retryable.
    Failed(Error),
}

impl RetrySchedule {
    /// Runs `attempt` until it succeeds, a failure is not retryable, or the window
    /// closes.
    pub(crate) async fn run<T, F, Fut>(&self, clock: &dyn Clock, attempt: F) -> Result<T, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let policy = self.backoff();
        let outcome = crate::retry::retry_on_clock(
            "reflection stage",
            &policy,
            |e| classify(e) == Class::Retry,
            || clock.now(),
            |d| clock.sleep(d),
            attempt,
        )
        .await;
        outcome.map_err(|error| match classify(&error) {
            Class::Fail => Stop::Failed(error),
            // A 4xx, or the window closed on retryable failures.
            Class::Abandon | Class::Retry => Stop::Abandoned(error),
        })
    }

    /// This schedule as a configuration of the crate's one retry policy: doubling
    /// from `first_delay` to `max_delay`, no attempt bound, each wait ending within
    /// `window` of the first failure; no jitter, no Retry-After hint.
    fn backoff(&self) -> crate::retry::Backoff {
        crate::retry::Backoff::polling(self.first_delay, self.max_delay)
            .within(self.window, crate::retry::Since::FirstFailure)
    }
}

internal_item!(
    /// The episode body of an artefact: `{"id": …, "payload": …}`.
    pub fn artefact_body(artefact: &Artefact) -> Value {
        artefact.body()
    }
);

/// Reads an artefact from a stored Reflection episode body; `None` when the body is
/// not a well-formed artefact (an object with exactly a string `id` and an object
/// `payload`).
pub(crate) fn parse_artefact(body: &str) -> Option<Artefact> {
    Artefact::from_body(body)
}

fn episode_uuid(artefact_id: &str) -> Result<uuid::Uuid> {
    uuid::Uuid::parse_str(artefact_id)
        .map_err(|_| Error::invalid("artefact.id", "must be a UUID (see artefact_id)"))
}

/// The artefact stored under `artefact_id` in `graph` (complete or not), if any.
/// A stored body naming a different artefact, or not an artefact at all, is an
/// [`Error::ArtefactConflict`].
pub(crate) async fn stored_artefact<S: Storage + ?Sized>(
    storage: &S,
    graph: &GraphId,
    artefact_id: &str,
) -> Result<Option<Artefact>> {
    let uuid = episode_uuid(artefact_id)?;
    let Some(record) = storage.get_episode(graph, uuid).await? else {
        return Ok(None);
    };
    match parse_artefact(&record.content) {
        Some(a) if a.id == artefact_id => Ok(Some(a)),
        _ => Err(Error::ArtefactConflict {
            id: artefact_id.to_string(),
        }),
    }
}

internal_item!(
    /// Writes `artefact` to `graph` create-or-confirm (see the module documentation).
    pub async fn deliver<S: Storage + ?Sized>(
        storage: &S,
        graph: &GraphId,
        reflection: &Reflection,
        artefact: &Artefact,
    ) -> Result<()> {
        let uuid = episode_uuid(&artefact.id)?;
        let mut episode = NewEpisode::new(
            graph.clone(),
            Writer::Reflection(reflection.name().to_string()),
            Content::structured(artefact_body(artefact)),
            "",
            None,
        )
        .ontology(reflection.output_ontology().clone());
        episode.uuid = uuid;
        let span = tracing::info_span!(
            "reflection.deliver",
            reflection = reflection.name(),
            artefact = artefact.id.as_str(),
            graph = graph.as_str()
        );
        use tracing::Instrument;
        match storage.add_episode(episode).instrument(span).await {
            Ok(_) => Ok(()),
            Err(Error::EpisodeConflict { .. }) => Err(Error::ArtefactConflict {
                id: artefact.id.clone(),
            }),
            Err(e) => Err(e),
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider(status: Option<u16>) -> Error {
        Error::Provider {
            provider: "openai".into(),
            status,
            message: "m".into(),
            retry_after: None,
            source: None,
        }
    }

    #[test]
    fn five_hundreds_retry_four_hundreds_abandon_others_fail() {
        assert_eq!(classify(&provider(Some(503))), Class::Retry);
        assert_eq!(classify(&provider(Some(500))), Class::Retry);
        assert_eq!(classify(&provider(Some(400))), Class::Abandon);
        assert_eq!(classify(&provider(Some(429))), Class::Abandon);
        assert_eq!(classify(&provider(None)), Class::Retry);
        assert_eq!(
            classify(&Error::Connection {
                context: "c".into(),
                source: None
            }),
            Class::Retry
        );
        assert_eq!(
            classify(&Error::ReflectionOutput {
                reflection: "r".into(),
                step: "s".into(),
                key: "k".into(),
                problem: "is missing".into()
            }),
            Class::Fail
        );
        // A status inside a chain of causes counts.
        let wrapped = Error::task("a reflection task", provider(Some(502)));
        assert_eq!(http_status(&wrapped), Some(502));
        assert_eq!(classify(&wrapped), Class::Retry);
    }

    #[tokio::test]
    async fn the_schedule_doubles_from_one_second_to_one_hour_within_24_hours() {
        let clock = ManualClock::new();
        let mut attempts = 0;
        let stop = RetrySchedule::default()
            .run(&clock, || {
                attempts += 1;
                async { Err::<(), _>(provider(Some(503))) }
            })
            .await
            .unwrap_err();
        assert!(matches!(stop, Stop::Abandoned(Error::Provider { .. })));
        // Independently: 1, 2, 4, … 2048 s (12 sleeps, 4095 s), then 3600 s while
        // elapsed + 3600 < 86400, i.e. while 4095 + 3600·k < 82800: k = 0..=21.
        let mut expected: Vec<Duration> = (0..12).map(|i| Duration::from_secs(1 << i)).collect();
        expected.extend(std::iter::repeat_n(Duration::from_secs(3600), 22));
        assert_eq!(clock.sleeps(), expected);
        assert_eq!(attempts, 35);
        let total: Duration = clock.sleeps().iter().sum();
        assert_eq!(total, Duration::from_secs(83_295));
        assert!(total < Duration::from_secs(86_400));
    }

    #[tokio::test]
    async fn time_spent_working_counts_toward_the_window() {
        let clock = ManualClock::new();
        let worker = clock.clone();
        let stop = RetrySchedule::default()
            .run(&clock, || {
                worker.advance(Duration::from_secs(23 * 3600));
                async { Err::<(), _>(provider(Some(500))) }
            })
            .await
            .unwrap_err();
        // First failure at 23 h (elapsed 0): sleep 1 s; the second fails at 46 h + 1 s
        // (elapsed 23 h + 1 s, + 2 s < 24 h): sleep 2 s; the third at 69 h + 3 s
        // (elapsed 46 h + 3 s): abandoned.
        assert!(matches!(stop, Stop::Abandoned(_)));
        assert_eq!(
            clock.sleeps(),
            vec![Duration::from_secs(1), Duration::from_secs(2)]
        );
    }

    #[tokio::test]
    async fn a_success_after_failures_and_immediate_abandonment_on_4xx() {
        let clock = ManualClock::new();
        let mut n = 0;
        let v = RetrySchedule::default()
            .run(&clock, || {
                n += 1;
                let r = if n < 3 {
                    Err(provider(Some(502)))
                } else {
                    Ok(n)
                };
                async move { r }
            })
            .await
            .unwrap();
        assert_eq!(v, 3);
        assert_eq!(
            clock.sleeps(),
            vec![Duration::from_secs(1), Duration::from_secs(2)]
        );
        let clock = ManualClock::new();
        let stop = RetrySchedule::default()
            .run(&clock, || async { Err::<(), _>(provider(Some(404))) })
            .await
            .unwrap_err();
        assert!(matches!(stop, Stop::Abandoned(_)));
        assert!(clock.sleeps().is_empty());
        let stop = RetrySchedule::default()
            .run(&clock, || async {
                Err::<(), _>(Error::NotFound("x".into()))
            })
            .await
            .unwrap_err();
        assert!(matches!(stop, Stop::Failed(_)));
    }

    #[test]
    fn artefact_bodies_round_trip_and_malformed_ones_are_refused() {
        let a = Artefact::new("id-1", json!({"lesson": "x"}));
        assert_eq!(parse_artefact(&artefact_body(&a).to_string()), Some(a));
        for bad in [
            "not json",
            r#"{"id": "x"}"#,
            r#"{"id": 1, "payload": {}}"#,
            r#"{"id": "x", "payload": "text"}"#,
            r#"{"id": "x", "payload": {}, "more": 1}"#,
            r#"[1]"#,
        ] {
            assert_eq!(parse_artefact(bad), None, "{bad}");
        }
    }
}
