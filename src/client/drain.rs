//! Work a client must let finish before it stops: what a holder of accepted writes
//! (the agent layer's capture buffer, for one) registers with
//! [`MemoryClient::drain_on_shutdown`](super::MemoryClient::drain_on_shutdown), so that
//! one [`Client::shutdown`](super::Client::shutdown) writes it before the storage stops.

use async_trait::async_trait;

use crate::Result;

/// Something holding accepted work that [`Client::shutdown`](super::Client::shutdown)
/// drains first, in registration order, while the client still accepts writes.
///
/// A drain bounds itself (the capture buffer by
/// [`CaptureConfig::shutdown_timeout`](crate::agent::capture::CaptureConfig::shutdown_timeout));
/// the client waits for each in turn. A failed drain does not stop the shutdown: the
/// storage is still released, and the first failure is what `shutdown` returns.
#[async_trait]
pub trait Drain: Send + Sync + 'static {
    /// Whether the holder still exists; a dropped holder has nothing left to drain
    /// and is forgotten.
    fn is_live(&self) -> bool;

    /// Writes what is held, within the holder's own bound.
    async fn drain(&self) -> Result<()>;
}
