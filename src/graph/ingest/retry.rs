//! The retry policy of the ingestion steps, on the crate's one retry helper.

use std::time::Duration;

use crate::Result;
use crate::retry::{Backoff, retry_when};

/// Nine attempts, backoff from 50 ms doubling to 2 s: about 7 s in all, which
/// outlasts a restart of the embedded server on a loaded machine (the 1.5 s of six
/// attempts did not, in CI: a commit that had crashed the server came back as
/// "connection refused" instead of being counted and quarantined).
const DB_STEP: Backoff = Backoff::new(9, Duration::from_millis(50), Duration::from_secs(2));

/// Runs an idempotent database step, retrying a lost connection (a FalkorDB restart)
/// up to 8 times with backoff from 50 ms to 2 s. Other errors return at once.
pub(super) async fn retry_db_step<T, F, Fut>(what: &str, step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    retry_when(what, DB_STEP, crate::Error::is_connection, step).await
}
