//! The one retry helper of the ingestion steps.

use std::time::Duration;

use crate::{Error, Result};

/// Runs an idempotent database step, retrying a lost connection (a FalkorDB restart)
/// up to 5 times with backoff from 50 ms to 2 s. Other errors return at once.
pub(super) async fn retry_db_step<T, F, Fut>(what: &str, mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut delay = Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match step().await {
            Err(e @ Error::Connection { .. }) if attempt < 6 => {
                tracing::warn!(step = what, attempt, error = %e, "database step failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                attempt += 1;
            }
            other => return other,
        }
    }
}
