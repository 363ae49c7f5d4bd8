//! Writing a flush: each route's transcript in parts, each part with the buffer's
//! retries, and what a failure means for the route.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::super::transcript::transcript_parts;
use super::{CAPTURED, Entry, Inner, PendingRoute, RouteTarget};
use crate::client::Ingest;
use crate::graph::{MAX_CONTENT_BYTES, Timestamp};
use crate::storage::Content;
use crate::{Error, Result};

/// What to do with a failed write.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Dropped with a warning: retrying cannot help.
    Drop(&'static str),
    /// Not retried now, not dropped either: the route stays buffered (in memory and in
    /// the store) for the next flush, and the failure is reported.
    Hold(&'static str),
    /// Retried after the next delay.
    Retry,
    /// Left in the store for the next buffer (the client is closed).
    Keep,
}

fn verdict(e: &Error) -> Verdict {
    match e {
        Error::InvalidInput { .. }
        | Error::Config { .. }
        | Error::NotFound(_)
        | Error::EpisodeConflict { .. }
        | Error::BudgetTooSmall { .. } => Verdict::Hold("capture kept (contract error)"),
        Error::Provider {
            status: Some(s), ..
        } if (400..500).contains(s) && *s != 408 && *s != 429 => {
            Verdict::Drop("capture dropped (4xx)")
        }
        Error::Provider { .. } | Error::ModelOutput { .. } => {
            Verdict::Drop("capture dropped (upstream error)")
        }
        // Stored and searchable by its text, never extracted again: nothing to retry.
        Error::EpisodeQuarantined { .. } => Verdict::Drop("capture dropped (quarantined)"),
        Error::Closed { .. } => Verdict::Keep,
        _ => Verdict::Retry,
    }
}

/// The ingestion id (direct: the replay key) of part `index` of a route's transcript:
/// the route's own id for the first part, `<id>.<index>` for the next ones. The parts
/// are cut the same way from the same turns every time, so a replay after a partial
/// flush gives every part the id it had and stores nothing twice.
fn part_id(ingestion_id: &str, index: usize) -> String {
    if index == 0 {
        ingestion_id.to_string()
    } else {
        format!("{ingestion_id}.{index}")
    }
}

/// Writes `left`'s entries in order, each route with its retries, each route's
/// transcript in parts that fit the content limit; routes written or dropped leave
/// `left` as they go, so what remains is what was not done: on a timeout, everything
/// not yet written; at the end, the entries whose routes met a contract error (kept,
/// for the caller to put back). Returns the first failure.
pub(super) async fn deliver(inner: &Arc<Inner>, left: &Arc<Mutex<Vec<Entry>>>) -> Result<()> {
    let started = Instant::now();
    let mut first: Option<Error> = None;
    let mut written = 0;
    // Entries kept for a later flush: passed over for the rest of this one.
    let mut kept_back: Vec<String> = Vec::new();
    loop {
        let Some(entry) = left
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| !kept_back.contains(&e.pending.id))
            .cloned()
        else {
            break;
        };
        let parts = match transcript_parts(
            &entry.pending.turns,
            &entry.pending.binding.agent_name,
            &entry.pending.binding.human_name,
            MAX_CONTENT_BYTES,
        ) {
            Ok(p) => p,
            Err(e) => {
                // Names are checked at append: only an entry edited in the store gets
                // here. Kept, never deleted.
                tracing::error!(session = %entry.pending.session_id, error = %e, "capture kept (contract error)");
                kept_back.push(entry.pending.id.clone());
                first.get_or_insert(e);
                continue;
            }
        };
        for (i, part) in parts.iter().enumerate() {
            tracing::debug!(session = %entry.pending.session_id, part = i, parts = parts.len(), transcript = %part, "[gralkor] capture transcript");
        }
        let mut closed = false;
        for route in entry.pending.routes.clone() {
            match write_parts(inner, &entry, &route, &parts).await {
                Ok(()) => written += 1,
                Err((e, Verdict::Keep)) => {
                    // The client is closed: the entry stays in the store as it is.
                    tracing::warn!(error = %e, "capture kept for the next buffer (client closed)");
                    first.get_or_insert(e);
                    closed = true;
                    break;
                }
                Err((e, Verdict::Hold(_))) => {
                    // The route stays on the entry, for the next flush.
                    first.get_or_insert(e);
                    continue;
                }
                Err((e, _)) => {
                    first.get_or_insert(e);
                }
            }
            // Written or dropped: the route is done.
            let remaining = {
                let mut guard = left.lock().unwrap_or_else(|p| p.into_inner());
                let Some(e) = guard.iter_mut().find(|e| e.pending.id == entry.pending.id) else {
                    break;
                };
                e.pending.routes.retain(|r| r != &route);
                e.pending.clone()
            };
            if !remaining.routes.is_empty()
                && let Err(e) = inner.store.save(&remaining).await
            {
                tracing::warn!(error = %e, "could not record a written capture route; it will be replayed (replay-safe)");
            }
        }
        if closed {
            left.lock().unwrap_or_else(|p| p.into_inner()).clear();
            break;
        }
        let routes_left = left
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|e| e.pending.id == entry.pending.id)
            .map_or(0, |e| e.pending.routes.len());
        if routes_left > 0 {
            kept_back.push(entry.pending.id.clone());
        } else {
            finish(inner, left, &entry.pending.id).await;
        }
    }
    if written > 0 {
        tracing::info!(
            routes = written,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "[gralkor] capture flushed"
        );
    }
    if !kept_back.is_empty() {
        tracing::error!(
            entries = kept_back.len(),
            "[gralkor] capture kept after a contract error; the next flush tries again"
        );
    }
    match first {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The entry is done: out of `left` and out of the store.
async fn finish(inner: &Arc<Inner>, left: &Arc<Mutex<Vec<Entry>>>, id: &str) {
    left.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|e| e.pending.id != id);
    if let Err(e) = inner.store.remove(id).await {
        tracing::warn!(error = %e, "could not remove a flushed capture; it will be replayed (replay-safe)");
    }
}

/// Writes a route's transcript parts in order, each with its retries and its own
/// id ([`part_id`]); stops at the first part that fails. A replay writes the parts
/// already stored again under the same ids, which stores nothing twice. No parts (no
/// turn with a user or assistant line): nothing to write.
async fn write_parts(
    inner: &Arc<Inner>,
    entry: &Entry,
    route: &PendingRoute,
    parts: &[String],
) -> std::result::Result<(), (Error, Verdict)> {
    for (i, part) in parts.iter().enumerate() {
        let id = part_id(&route.ingestion_id, i);
        write_with_retries(inner, entry, route, &id, part).await?;
    }
    Ok(())
}

async fn write_with_retries(
    inner: &Arc<Inner>,
    entry: &Entry,
    route: &PendingRoute,
    id: &str,
    transcript: &str,
) -> std::result::Result<(), (Error, Verdict)> {
    // The configured delays as a listed schedule of the crate's one retry policy.
    let policy = crate::retry::Backoff::listed(inner.config.retry_delays.iter().copied());
    let written = crate::retry::retry_when(
        "capture write",
        policy,
        |e| matches!(verdict(e), Verdict::Retry),
        || write_once(inner, entry, route, id, transcript),
    )
    .await;
    let Err(e) = written else { return Ok(()) };
    let v = verdict(&e);
    match v {
        Verdict::Retry => tracing::error!(route = %route.target, error = %e, "capture exhausted"),
        Verdict::Drop(why) => tracing::warn!(route = %route.target, error = %e, "{why}"),
        Verdict::Hold(why) => tracing::error!(route = %route.target, error = %e, "{why}"),
        Verdict::Keep => {}
    }
    Err((e, v))
}

/// One attempt, in its own task so a panicking ingestion process is a failure to
/// retry rather than a lost flush.
async fn write_once(
    inner: &Arc<Inner>,
    entry: &Entry,
    route: &PendingRoute,
    id: &str,
    transcript: &str,
) -> Result<()> {
    let sink = inner.sink.clone();
    let snapshot = entry.frozen.clone();
    let binding = entry.pending.binding.clone();
    let reference_time = Timestamp(entry.pending.accepted_at);
    let content = Content::conversation(transcript);
    let session = entry.pending.session_id.clone();
    let route = route.clone();
    let id = id.to_string();
    let attempt = tokio::spawn(async move {
        match &route.target {
            RouteTarget::Direct(destination) => {
                sink.write_direct(
                    &snapshot,
                    destination,
                    &binding.operator_id,
                    content,
                    CAPTURED,
                    reference_time,
                    &id,
                    Some(&session),
                    binding.subject.as_ref(),
                    binding.custom_instructions.as_deref(),
                )
                .await
            }
            RouteTarget::Lens(lens) => {
                let mut ingest =
                    Ingest::new(id, binding.operator_id.clone(), lens.clone(), content)
                        .source_description(CAPTURED)
                        .session(session);
                ingest.reference_time = Some(reference_time);
                ingest.subject = binding.subject.clone();
                ingest.custom_instructions = binding.custom_instructions.clone();
                sink.ingest_frozen(&snapshot, &ingest).await
            }
        }
    });
    // A flush given up (a `flush_and_await` timeout, a drain cut short) stops its
    // attempt too: what it had not written is put back, never half-running.
    let mut attempt = AbortOnDrop(attempt);
    match (&mut attempt.0).await {
        Ok(outcome) => outcome,
        Err(e) => Err(Error::task("a capture write", e)),
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn verdicts_follow_the_retry_ownership() {
        let provider = |status| Error::Provider {
            provider: "openai".into(),
            status,
            message: "m".into(),
            retry_after: None,
            source: None,
        };
        for contract in [
            Error::invalid("f", "r"),
            Error::NotFound("n".into()),
            Error::Config {
                field: "c".into(),
                rule: "r".into(),
            },
        ] {
            assert_eq!(
                verdict(&contract),
                Verdict::Hold("capture kept (contract error)"),
                "{contract:?}"
            );
        }
        assert_eq!(
            verdict(&provider(Some(400))),
            Verdict::Drop("capture dropped (4xx)")
        );
        for status in [Some(429), Some(503), None] {
            assert_eq!(
                verdict(&provider(status)),
                Verdict::Drop("capture dropped (upstream error)")
            );
        }
        assert_eq!(verdict(&Error::Closed { what: "x".into() }), Verdict::Keep);
        assert_eq!(
            verdict(&Error::Timeout {
                operation: "q".into(),
                after: Duration::from_secs(1)
            }),
            Verdict::Retry
        );
        assert_eq!(verdict(&Error::Protocol("p".into())), Verdict::Retry);
        assert_eq!(
            verdict(&Error::EpisodeBusy {
                uuid: uuid::Uuid::nil()
            }),
            Verdict::Retry
        );
        assert_eq!(
            verdict(&Error::EpisodeQuarantined {
                uuid: uuid::Uuid::nil(),
                unanswered: 2
            }),
            Verdict::Drop("capture dropped (quarantined)")
        );
    }
}
