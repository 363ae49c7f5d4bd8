//! Usage accounting: tokens, latency and outcome of every provider call, by label.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::TokenUsage;

/// Totals over a set of calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageTotals {
    /// Logical calls (one generation, one embedding batch, one rerank request), each
    /// counted once however many HTTP attempts it took.
    pub calls: u64,
    /// Calls that ended in an error.
    pub failed_calls: u64,
    /// HTTP attempts beyond the first (retries after 429, 5xx, timeouts, …).
    pub retries: u64,
    /// Input tokens reported by the provider.
    pub prompt_tokens: u64,
    /// Output tokens reported by the provider.
    pub completion_tokens: u64,
    /// Wall-clock time spent in calls, retries and waits included.
    pub latency: Duration,
}

impl UsageTotals {
    fn add(&mut self, record: &CallRecord) {
        self.calls += 1;
        self.failed_calls += u64::from(!record.ok);
        self.retries += u64::from(record.attempts.saturating_sub(1));
        self.prompt_tokens += record.tokens.prompt_tokens;
        self.completion_tokens += record.tokens.completion_tokens;
        self.latency += record.latency;
    }
}

/// A point-in-time copy of a [`UsageMeter`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageSnapshot {
    /// Everything.
    pub total: UsageTotals,
    /// Per caller-supplied label (pipeline step, destination, …).
    pub by_label: BTreeMap<String, UsageTotals>,
    /// Per provider (`openai`, `google`, …).
    pub by_provider: BTreeMap<String, UsageTotals>,
}

/// One finished logical call.
#[derive(Debug, Clone)]
pub(crate) struct CallRecord {
    pub provider: String,
    pub label: String,
    pub tokens: TokenUsage,
    pub latency: Duration,
    pub attempts: u32,
    pub ok: bool,
}

/// A shared, cheap-to-clone usage counter. Every client built by
/// [`ModelConfig::build`](super::ModelConfig::build) records into the same meter;
/// clients built by hand take one in their builder.
///
/// ```
/// use gralkor::llm::UsageMeter;
///
/// let meter = UsageMeter::new();
/// let snapshot = meter.snapshot();
/// assert_eq!(snapshot.total.calls, 0);
/// ```
#[derive(Debug, Clone, Default)]
pub struct UsageMeter {
    inner: Arc<Mutex<UsageSnapshot>>,
}

impl UsageMeter {
    /// An empty meter.
    pub fn new() -> Self {
        Self::default()
    }

    /// The totals so far.
    pub fn snapshot(&self) -> UsageSnapshot {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Clears every counter.
    pub fn reset(&self) {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner()) = UsageSnapshot::default();
    }

    pub(crate) fn record(&self, record: CallRecord) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.total.add(&record);
        s.by_label
            .entry(record.label.clone())
            .or_default()
            .add(&record);
        s.by_provider
            .entry(record.provider.clone())
            .or_default()
            .add(&record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_per_label_and_provider() {
        let meter = UsageMeter::new();
        let rec = |label: &str, p: u64, c: u64, attempts: u32, ok: bool| CallRecord {
            provider: "openai".into(),
            label: label.into(),
            tokens: TokenUsage {
                prompt_tokens: p,
                completion_tokens: c,
            },
            latency: Duration::from_millis(10),
            attempts,
            ok,
        };
        meter.record(rec("extract", 100, 20, 1, true));
        meter.record(rec("extract", 50, 5, 3, true));
        meter.clone().record(rec("embed", 7, 0, 2, false));
        let s = meter.snapshot();
        assert_eq!(s.total.calls, 3);
        assert_eq!(s.total.failed_calls, 1);
        assert_eq!(s.total.retries, 3);
        assert_eq!(s.total.prompt_tokens, 157);
        assert_eq!(s.total.latency, Duration::from_millis(30));
        assert_eq!(s.by_label["extract"].completion_tokens, 25);
        assert_eq!(s.by_label["extract"].calls, 2);
        assert_eq!(s.by_label["embed"].failed_calls, 1);
        assert_eq!(s.by_provider["openai"].calls, 3);
        meter.reset();
        assert_eq!(meter.snapshot(), UsageSnapshot::default());
    }
}
