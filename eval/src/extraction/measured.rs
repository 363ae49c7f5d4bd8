//! Every structured call of a run, measured by pipeline step: how many answers were
//! schema-valid (first time or after a repair), how many timed out, the latency
//! p50/p95 per call and the tokens — the answer to "will my model work?", beside the
//! extraction scores.
//!
//! ```
//! # async fn run() -> gralkor::Result<()> {
//! use std::sync::Arc;
//! use gralkor::llm::doubles::ScriptedModel;
//! use gralkor::llm::{GenerateRequest, LanguageModel, OutputSchema};
//! use gralkor_eval::extraction::MeasuredModel;
//! use serde_json::json;
//!
//! let scripted = ScriptedModel::new().answer("n", json!({"n": 1}));
//! let measured = MeasuredModel::new(Arc::new(scripted));
//! let schema = OutputSchema::new("n", json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
//! measured.generate(&GenerateRequest::new(schema).user("one").label("extract")).await?;
//! let steps = measured.steps();
//! assert_eq!((steps[0].step.as_str(), steps[0].calls, steps[0].valid), ("extract", 1, 1));
//! print!("{}", MeasuredModel::table(&steps));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use gralkor::Error;
use gralkor::llm::{GenerateRequest, Generation, LanguageModel, ModelSize};
use serde::Serialize;

use crate::report::{pct, table};

/// The calls of one pipeline step (a request label).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StepCalls {
    /// The step (`extract`, `resolve_entities`, …).
    pub step: String,
    /// Structured calls.
    pub calls: u64,
    /// Calls that returned a schema-valid answer.
    pub valid: u64,
    /// Of those, how many needed a repair turn.
    pub repaired: u64,
    /// Calls that ended at their deadline.
    pub timed_out: u64,
    /// Prompt tokens of the valid answers.
    pub prompt_tokens: u64,
    /// Completion tokens of the valid answers.
    pub completion_tokens: u64,
    /// Wall time of each call, in milliseconds, in call order.
    pub latencies_ms: Vec<f64>,
}

impl StepCalls {
    /// The share of calls with a schema-valid answer; `None` without calls.
    pub fn valid_share(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.valid as f64 / self.calls as f64)
    }

    /// The latency below which `q` (0–1) of the calls fall (nearest rank); `None`
    /// without calls.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
    }
}

/// A language model that records every call by step, then answers as the model it
/// wraps.
#[derive(Debug, Clone)]
pub struct MeasuredModel {
    inner: Arc<dyn LanguageModel>,
    steps: Arc<Mutex<BTreeMap<String, StepCalls>>>,
}

impl MeasuredModel {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn LanguageModel>) -> Self {
        MeasuredModel {
            inner,
            steps: Arc::default(),
        }
    }

    /// What was recorded so far, one entry per step, by step name.
    pub fn steps(&self) -> Vec<StepCalls> {
        self.steps
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// The steps as a table: calls, schema-valid %, repaired, timeouts, latency p50 and
    /// p95 per call, tokens per valid call (`n/a` where there is nothing to count).
    pub fn table(steps: &[StepCalls]) -> String {
        let header = [
            "step", "calls", "valid %", "repaired", "timeouts", "p50 ms", "p95 ms", "tok/call",
        ];
        let ms = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0}"));
        let rows: Vec<Vec<String>> = steps
            .iter()
            .map(|s| {
                vec![
                    s.step.clone(),
                    s.calls.to_string(),
                    pct(s.valid_share()),
                    s.repaired.to_string(),
                    s.timed_out.to_string(),
                    ms(s.latency_ms(0.5)),
                    ms(s.latency_ms(0.95)),
                    (s.prompt_tokens + s.completion_tokens)
                        .checked_div(s.valid)
                        .map_or_else(|| "n/a".to_owned(), |t| t.to_string()),
                ]
            })
            .collect();
        format!("structured calls by step\n{}", table(&header, &rows))
    }
}

#[async_trait]
impl LanguageModel for MeasuredModel {
    async fn generate(&self, request: &GenerateRequest) -> gralkor::Result<Generation> {
        let started = Instant::now();
        let outcome = self.inner.generate(request).await;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let mut steps = self.steps.lock().expect("not poisoned");
        let s = steps
            .entry(request.label.clone())
            .or_insert_with(|| StepCalls {
                step: request.label.clone(),
                ..StepCalls::default()
            });
        s.calls += 1;
        s.latencies_ms.push(ms);
        match &outcome {
            Ok(g) => {
                s.valid += 1;
                s.repaired += u64::from(g.repaired);
                s.prompt_tokens += g.usage.prompt_tokens;
                s.completion_tokens += g.usage.completion_tokens;
            }
            Err(Error::Timeout { .. }) => s.timed_out += 1,
            Err(_) => {}
        }
        outcome
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model(&self, size: ModelSize) -> &str {
        self.inner.model(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_empty_steps_are_n_a() {
        let s = StepCalls {
            step: "x".into(),
            calls: 4,
            valid: 3,
            latencies_ms: vec![40.0, 10.0, 30.0, 20.0],
            ..StepCalls::default()
        };
        assert_eq!(s.latency_ms(0.5), Some(20.0));
        assert_eq!(s.latency_ms(0.95), Some(40.0));
        assert_eq!(s.valid_share(), Some(0.75));
        let empty = StepCalls::default();
        assert_eq!((empty.latency_ms(0.5), empty.valid_share()), (None, None));
        let t = MeasuredModel::table(&[empty]);
        assert!(t.lines().last().unwrap().contains("n/a"), "{t}");
    }
}
