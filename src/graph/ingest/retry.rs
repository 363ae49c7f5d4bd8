//! The retry policy of the ingestion steps, on the crate's one retry helper.

use std::time::Duration;

use crate::Result;
use crate::retry::{Backoff, retry_when};

/// Six attempts, backoff from 50 ms doubling to 2 s.
const DB_STEP: Backoff = Backoff::new(6, Duration::from_millis(50), Duration::from_secs(2));

/// Runs an idempotent database step, retrying a lost connection (a FalkorDB restart)
/// up to 5 times with backoff from 50 ms to 2 s. Other errors return at once.
pub(super) async fn retry_db_step<T, F, Fut>(what: &str, step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    retry_when(what, DB_STEP, crate::Error::is_connection, step).await
}
