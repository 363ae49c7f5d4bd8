//! Keeping a claim alive while an episode is processed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use uuid::Uuid;

use crate::falkordb::FalkorDb;
use crate::graph::store::ingest as st;

/// Shortest interval between renewals, so a tiny lease cannot spin.
const MIN_RENEWAL: Duration = Duration::from_millis(50);

/// A held claim: a background task renews the lease every third of its length until
/// the `Lease` is dropped, and records when a renewal finds the claim gone.
pub(super) struct Lease {
    lost: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Lease {
    pub(super) fn hold(
        db: &FalkorDb,
        graph: &str,
        uuid: Uuid,
        generation: i64,
        lease: Duration,
    ) -> Lease {
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let (db, graph) = (db.clone(), graph.to_owned());
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let every = (lease / 3).max(MIN_RENEWAL);
        // Renewals count as the episode's round trips.
        let counter = crate::falkordb::round_trip_counter();
        let renewals = async move {
            loop {
                tokio::time::sleep(every).await;
                match st::renew(&db, &graph, uuid, generation, lease_ms).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%uuid, generation, "lost the claim on an episode");
                        flag.store(true, Ordering::SeqCst);
                        return;
                    }
                    // A failed renewal is retried at the next tick; the commit's fence
                    // decides in the end.
                    Err(e) => tracing::warn!(%uuid, error = %e, "renewing an episode lease failed"),
                }
            }
        };
        let task = match counter {
            Some(counter) => tokio::spawn(crate::falkordb::count_round_trips(counter, renewals)),
            None => tokio::spawn(renewals),
        };
        Lease { lost, task }
    }

    /// Whether a renewal found the claim taken over.
    pub(super) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}
