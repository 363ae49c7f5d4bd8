//! The retrieval benchmark: LongMemEval- and LoCoMo-format sets ingested through the
//! agent layer's transcript rules, questions through [`gralkor::agent::recall()`],
//! and the accuracy–latency–context triple per question kind.
//!
//! The public sets are not shipped (see `eval/README.md` for where to get them and
//! their licences); [`shipped_synthetic_set`] is a small set written for gralkor in
//! the LongMemEval format.
//!
//! ```no_run
//! # async fn run(client: gralkor::NativeClient) -> gralkor_eval::Result<()> {
//! use gralkor_eval::retrieval::{self, RunOptions};
//!
//! let dataset = retrieval::load(&retrieval::shipped_synthetic_set(), None)?;
//! let run = retrieval::run_dataset(&client, &dataset, &RunOptions::default()).await?;
//! println!("{}", retrieval::Summary::of(&run, &RunOptions::default().ks).table("offline"));
//! # Ok(()) }
//! ```

pub mod bm25;
pub mod dataset;
pub mod generate;
pub mod run;
pub mod scripted;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use dataset::{Conversation, Dataset, Format, Question, Scoring, Session, load};
pub use run::{
    ABSTENTION_PHRASES, ANSWER_SYSTEM, Baseline, DEFAULT_KS, JUDGE_SYSTEM, QuestionResult,
    RunOptions, RunResult, answer_correct, context_supports, run_dataset, session_transcript,
};

use crate::report::{pct, table};
use crate::text::quantile;

/// The shipped synthetic set (LongMemEval format).
pub fn shipped_synthetic_set() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/retrieval/synthetic.json")
}

/// The measures of a group of questions.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Row {
    /// Questions.
    pub questions: usize,
    /// Mean recall@k over the questions with evidence, per k.
    pub recall_at: BTreeMap<usize, Option<f64>>,
    /// Share of scored questions whose recalled context supports the answer.
    pub context_accuracy: Option<f64>,
    /// Share of the model's answers right by the deterministic rule.
    pub answer_accuracy: Option<f64>,
    /// Share of the model's answers the judge accepts.
    pub judge_accuracy: Option<f64>,
    /// Recall latency, median, in milliseconds.
    pub latency_p50_ms: f64,
    /// Recall latency, 95th percentile, in milliseconds.
    pub latency_p95_ms: f64,
    /// Context tokens, median.
    pub context_tokens_p50: f64,
    /// Context tokens, mean.
    pub context_tokens_mean: f64,
    /// Recalls that failed.
    pub errors: usize,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut s) = (0usize, 0.0);
    for x in v {
        n += 1;
        s += x;
    }
    (n > 0).then(|| s / n as f64)
}

fn share(v: impl Iterator<Item = Option<bool>>) -> Option<f64> {
    mean(v.flatten().map(|b| if b { 1.0 } else { 0.0 }))
}

impl Row {
    /// The measures of `results`.
    pub fn of(results: &[&QuestionResult], ks: &[usize]) -> Row {
        let latencies: Vec<f64> = results.iter().map(|r| r.latency_ms).collect();
        let tokens: Vec<f64> = results.iter().map(|r| r.context_tokens as f64).collect();
        Row {
            questions: results.len(),
            recall_at: ks
                .iter()
                .map(|&k| {
                    (
                        k,
                        mean(
                            results
                                .iter()
                                .filter_map(|r| r.recall_at.get(&k).copied().flatten()),
                        ),
                    )
                })
                .collect(),
            context_accuracy: share(results.iter().map(|r| r.context_correct)),
            answer_accuracy: share(results.iter().map(|r| r.answer_correct)),
            judge_accuracy: share(results.iter().map(|r| r.judge_correct)),
            latency_p50_ms: quantile(&latencies, 0.5),
            latency_p95_ms: quantile(&latencies, 0.95),
            context_tokens_p50: quantile(&tokens, 0.5),
            context_tokens_mean: mean(tokens.iter().copied()).unwrap_or(0.0),
            errors: results.iter().filter(|r| r.error.is_some()).count(),
        }
    }
}

/// A run's measures per question kind and overall.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The `k`s.
    pub ks: Vec<usize>,
    /// Per kind, in name order.
    pub kinds: BTreeMap<String, Row>,
    /// Every question.
    pub overall: Row,
    /// The BM25 baseline per kind (empty when it was not run).
    pub baseline_kinds: BTreeMap<String, Row>,
    /// The BM25 baseline on every question, when it was run.
    pub baseline: Option<Row>,
}

impl Summary {
    /// The summary of `run` at `ks`.
    pub fn of(run: &RunResult, ks: &[usize]) -> Summary {
        let mut by_kind: BTreeMap<String, Vec<&QuestionResult>> = BTreeMap::new();
        for q in &run.questions {
            by_kind.entry(q.question.kind.clone()).or_default().push(q);
        }
        let all: Vec<&QuestionResult> = run.questions.iter().collect();
        let base: Vec<QuestionResult> = run
            .questions
            .iter()
            .filter_map(QuestionResult::as_baseline)
            .collect();
        let mut base_by_kind: BTreeMap<String, Vec<&QuestionResult>> = BTreeMap::new();
        for q in &base {
            base_by_kind
                .entry(q.question.kind.clone())
                .or_default()
                .push(q);
        }
        let base_all: Vec<&QuestionResult> = base.iter().collect();
        Summary {
            baseline_kinds: base_by_kind
                .iter()
                .map(|(k, v)| (k.clone(), Row::of(v, ks)))
                .collect(),
            baseline: (!base_all.is_empty()).then(|| Row::of(&base_all, ks)),
            ks: ks.to_vec(),
            kinds: by_kind
                .iter()
                .map(|(k, v)| (k.clone(), Row::of(v, ks)))
                .collect(),
            overall: Row::of(&all, ks),
        }
    }

    /// The summary as a table (percentages; latency in ms; context in tokens), each
    /// row followed by the BM25 baseline's (`· BM25`) when it was run.
    pub fn table(&self, title: &str) -> String {
        let mut header: Vec<String> = vec!["kind".into(), "n".into()];
        header.extend(self.ks.iter().map(|k| format!("R@{k}")));
        header.extend(
            [
                "context",
                "answer",
                "judge",
                "p50 ms",
                "p95 ms",
                "ctx tok p50",
                "ctx tok mean",
                "errors",
            ]
            .map(String::from),
        );
        let row = |name: &str, r: &Row| {
            let mut cells = vec![name.to_owned(), r.questions.to_string()];
            cells.extend(
                self.ks
                    .iter()
                    .map(|k| pct(r.recall_at.get(k).copied().flatten())),
            );
            cells.extend([
                pct(r.context_accuracy),
                pct(r.answer_accuracy),
                pct(r.judge_accuracy),
                format!("{:.1}", r.latency_p50_ms),
                format!("{:.1}", r.latency_p95_ms),
                format!("{:.0}", r.context_tokens_p50),
                format!("{:.0}", r.context_tokens_mean),
                r.errors.to_string(),
            ]);
            cells
        };
        let mut rows: Vec<Vec<String>> = Vec::new();
        for (k, r) in &self.kinds {
            rows.push(row(k, r));
            if let Some(b) = self.baseline_kinds.get(k) {
                rows.push(row(&format!("{k} · BM25"), b));
            }
        }
        rows.push(row("ALL", &self.overall));
        if let Some(b) = &self.baseline {
            rows.push(row("ALL · BM25", b));
        }
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        format!("retrieval — {title}\n{}", table(&header, &rows))
    }
}
