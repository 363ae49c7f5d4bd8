//! Running a dataset: sessions in as transcript episodes, questions through
//! [`recall`], the answers checked.
//!
//! * **Ingestion.** Each conversation gets its own operator (its `personal` graph);
//!   each session becomes one conversation episode through the packaged
//!   `personal-chat` Lens, at the session's date: its turns scrubbed of recalled
//!   memory ([`MemoryFilter::scrub`]) and rendered by [`format_transcript`] with the
//!   conversation's human and agent names. What the client does with it depends on
//!   its engine: with a language model it extracts facts; without one the episode is
//!   stored with its embedding and recall answers from the episodes themselves.
//! * **Recall.** Each question is one [`recall`] of at most the largest `k` facts; the
//!   sessions it surfaces are the sessions of the facts' source episodes, in order,
//!   each once. Its latency is the wall time of the call. The answer context is the
//!   memory block of the first [`RunOptions::context_k`] facts; its context tokens
//!   are the estimate of that block.
//! * **Recall@k** of a question with evidence: the share of its evidence sessions
//!   among the first `k` surfaced sessions.
//! * **Context check** (deterministic, no model): whether the answer context
//!   supports the answer, by the question's [`Scoring`]: `exact` an accepted answer as
//!   a whole phrase, `contains` as a substring (both under
//!   [`normalise`]), `abstention` none of the question's
//!   `absent` words (not scored when it has none).
//! * **With a model**: an answer from the block ([`ANSWER_SYSTEM`]) checked by the
//!   same rule (`exact`: equal; `contains`: substring; `abstention`: the answer says
//!   it cannot tell, [`ABSTENTION_PHRASES`]), and a verdict of the judge prompt
//!   ([`JUDGE_SYSTEM`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::Client;
use gralkor::agent::recall::{RecallOptions, recall, render_block};
use gralkor::agent::transcript::{MemoryFilter, format_transcript};
use gralkor::client::{Content, Ingest, OperatorId};
use gralkor::llm::{GenerateRequest, LanguageModel, OutputSchema};
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::bm25::Bm25;
use super::dataset::{Conversation, Dataset, Question, Scoring};
use crate::Result;
use crate::text::{contains_phrase, estimate_tokens, normalise};

/// The `k`s recall is measured at.
pub const DEFAULT_KS: [usize; 4] = [1, 3, 5, 10];

/// Phrases by which an answer declines (compared under
/// [`normalise`]).
pub const ABSTENTION_PHRASES: [&str; 9] = [
    "i don t know",
    "not mentioned",
    "no information",
    "not enough information",
    "cannot tell",
    "can t tell",
    "cannot be determined",
    "unknown",
    "not in memory",
];

/// The system prompt of the answering call.
pub const ANSWER_SYSTEM: &str = "\
You answer a question about past conversations using only the memory given. The memory \
lists remembered facts or conversation excerpts with their dates. Answer briefly: a name, \
a date, a number or a short phrase, not a sentence, unless the question asks for more. \
Resolve relative dates against the dates given. When facts changed over time, answer with \
the latest one unless the question asks about the past. When the memory does not contain \
the answer, answer exactly: I don't know.";

/// The system prompt of the judge.
pub const JUDGE_SYSTEM: &str = "\
You grade an answer to a question about past conversations against the gold answer. \
The answer is correct when it states the same information as the gold answer: wording, \
format and extra detail do not matter, dates may be written differently, and for a count \
or a date the value must match. An answer that hedges between several options, or \
contradicts the gold answer, is incorrect. When the gold answer says the information is \
not available, the answer is correct only when it declines to answer.";

/// How a dataset is run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The `k`s recall@k is measured at (the largest is the recall limit).
    pub ks: Vec<usize>,
    /// Answers and judges with this model when set.
    pub model: Option<Arc<dyn LanguageModel>>,
    /// At most this many questions in all (in file order).
    pub max_questions: Option<usize>,
    /// The facts the answer context holds: the memory block of the first
    /// `context_k` recalled facts is what the context check reads, the model answers
    /// from and the context tokens count (default 3: with episodes-only retrieval each
    /// fact is a whole session; the binary uses 10 when facts are extracted).
    pub context_k: usize,
    /// Each recall's deadline.
    pub deadline: Duration,
    /// The operators are `<run_tag>-<n>` (default `eval`). Episode ids derive from the
    /// operator and the session, so a fixed tag gives every run the same ids, and the
    /// search the same order among equal scores: the figures repeat run to run. Use
    /// another tag to run again into a kept database (the same tag replays).
    pub run_tag: String,
    /// Ranks the same sessions for the same questions with plain BM25 too
    /// ([`bm25`](super::bm25); default on): each question's
    /// [`QuestionResult::baseline`].
    pub baseline: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            ks: DEFAULT_KS.to_vec(),
            model: None,
            max_questions: None,
            context_k: 3,
            deadline: Duration::from_secs(60),
            run_tag: "eval".to_owned(),
            baseline: true,
        }
    }
}

/// One question's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionResult {
    /// The question.
    pub question: Question,
    /// The conversation it belongs to.
    pub conversation: String,
    /// The sessions recall surfaced, in order.
    pub surfaced: Vec<String>,
    /// Recall@k per k (`None` without evidence).
    pub recall_at: BTreeMap<usize, Option<f64>>,
    /// Whether the recalled block supports the answer (`None`: not scored).
    pub context_correct: Option<bool>,
    /// The model's answer.
    pub answer: Option<String>,
    /// The deterministic check of the model's answer.
    pub answer_correct: Option<bool>,
    /// The judge's verdict.
    pub judge_correct: Option<bool>,
    /// Recall latency, in milliseconds.
    pub latency_ms: f64,
    /// The answer context: the memory block of the first `context_k` facts.
    pub context: String,
    /// Estimated tokens of the answer context.
    pub context_tokens: u64,
    /// The recall's error, if it failed.
    pub error: Option<String>,
    /// The plain BM25 baseline on the same question, when run.
    pub baseline: Option<Baseline>,
}

/// The BM25 baseline's outcome on one question: the sessions it ranks, recall@k, and
/// the context check, tokens and latency of its first `context_k` session transcripts.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The sessions, best first.
    pub surfaced: Vec<String>,
    /// Recall@k per k (`None` without evidence).
    pub recall_at: BTreeMap<usize, Option<f64>>,
    /// Whether the first `context_k` transcripts support the answer.
    pub context_correct: Option<bool>,
    /// Estimated tokens of those transcripts.
    pub context_tokens: u64,
    /// Ranking time, in milliseconds.
    pub latency_ms: f64,
}

impl QuestionResult {
    /// This question as the BM25 baseline answered it (its sessions, recall@k,
    /// context check, tokens and latency in place of gralkor's), when it was run.
    pub fn as_baseline(&self) -> Option<QuestionResult> {
        let b = self.baseline.as_ref()?;
        Some(QuestionResult {
            surfaced: b.surfaced.clone(),
            recall_at: b.recall_at.clone(),
            context_correct: b.context_correct,
            context_tokens: b.context_tokens,
            latency_ms: b.latency_ms,
            answer: None,
            answer_correct: None,
            judge_correct: None,
            context: String::new(),
            error: None,
            baseline: None,
            ..self.clone()
        })
    }
}

fn recall_at(q: &Question, surfaced: &[String], ks: &[usize]) -> BTreeMap<usize, Option<f64>> {
    ks.iter()
        .map(|&k| {
            let value = (!q.evidence.is_empty()).then(|| {
                let top: Vec<&String> = surfaced.iter().take(k).collect();
                q.evidence.iter().filter(|e| top.contains(e)).count() as f64
                    / q.evidence.len() as f64
            });
            (k, value)
        })
        .collect()
}

fn baseline(
    index: &Bm25,
    texts: &BTreeMap<String, String>,
    q: &Question,
    options: &RunOptions,
) -> Baseline {
    let started = Instant::now();
    let surfaced = index.rank(&q.question);
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let context: Vec<&str> = surfaced
        .iter()
        .take(options.context_k.max(1))
        .filter_map(|s| texts.get(s).map(String::as_str))
        .collect();
    let context = context.join("\n\n");
    Baseline {
        recall_at: recall_at(q, &surfaced, &options.ks),
        context_correct: context_supports(q, &context),
        context_tokens: estimate_tokens(&context),
        latency_ms,
        surfaced,
    }
}

/// What ingesting one conversation cost.
#[derive(Debug, Clone, Serialize)]
pub struct IngestResult {
    /// The conversation.
    pub conversation: String,
    /// Sessions ingested.
    pub sessions: usize,
    /// Wall time, in milliseconds.
    pub wall_ms: f64,
}

/// A dataset's run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The dataset.
    pub dataset: String,
    /// Ingestion, per conversation.
    pub ingestion: Vec<IngestResult>,
    /// One entry per question, in order.
    pub questions: Vec<QuestionResult>,
}

/// The transcript episode of a session (see the [module](self) documentation).
pub fn session_transcript(conversation: &Conversation, index: usize) -> Result<String> {
    let filter = MemoryFilter::new();
    let turns: Vec<_> = conversation.sessions[index]
        .turns
        .iter()
        .map(|t| filter.scrub(t))
        .collect();
    Ok(format_transcript(
        &turns,
        &conversation.agent,
        &conversation.human,
    )?)
}

/// Whether `text` supports one of `question`'s answers by its scoring rule, for a
/// recalled context (`None`: an abstention question without `absent` words).
pub fn context_supports(question: &Question, text: &str) -> Option<bool> {
    let t = normalise(text);
    match question.scoring {
        Scoring::Exact => Some(question.answers.iter().any(|a| contains_phrase(text, a))),
        Scoring::Contains => Some(
            question
                .answers
                .iter()
                .map(|a| normalise(a))
                .any(|a| !a.is_empty() && t.contains(&a)),
        ),
        Scoring::Abstention if question.absent.is_empty() => None,
        Scoring::Abstention => Some(!question.absent.iter().any(|w| contains_phrase(text, w))),
    }
}

/// Whether a model's `answer` is right by `question`'s scoring rule.
pub fn answer_correct(question: &Question, answer: &str) -> bool {
    let a = normalise(answer);
    let declines = ABSTENTION_PHRASES
        .iter()
        .any(|p| format!(" {a} ").contains(&format!(" {p} ")));
    match question.scoring {
        Scoring::Exact => !declines && question.answers.iter().any(|g| normalise(g) == a),
        Scoring::Contains => {
            !declines
                && question
                    .answers
                    .iter()
                    .map(|g| normalise(g))
                    .any(|g| !g.is_empty() && a.contains(&g))
        }
        Scoring::Abstention => declines,
    }
}

fn operator(conversation: usize, tag: &str) -> Result<OperatorId> {
    Ok(OperatorId::new(format!("{tag}-{}", conversation + 1))?)
}

/// Ingests every conversation of `dataset` into `client` and asks its questions
/// (see the [module](self) documentation), one at a time in file order.
pub async fn run_dataset(
    client: &dyn Client,
    dataset: &Dataset,
    options: &RunOptions,
) -> Result<RunResult> {
    let kmax = options.ks.iter().copied().max().unwrap_or(10).max(1);
    let recall_options = RecallOptions::new()
        .max_results(kmax)
        .deadline(options.deadline);
    let mut ingestion = Vec::new();
    let mut questions = Vec::new();
    let mut budget = options.max_questions.unwrap_or(usize::MAX);
    for (ci, c) in dataset.conversations.iter().enumerate() {
        if budget == 0 {
            break;
        }
        let op = operator(ci, &options.run_tag)?;
        let started = Instant::now();
        let mut session_of: BTreeMap<Uuid, String> = BTreeMap::new();
        let mut texts: BTreeMap<String, String> = BTreeMap::new();
        let mut docs: Vec<(String, String)> = Vec::new();
        for (si, s) in c.sessions.iter().enumerate() {
            let text = session_transcript(c, si)?;
            if text.trim().is_empty() {
                continue;
            }
            docs.push((s.id.clone(), text.clone()));
            texts.insert(s.id.clone(), text.clone());
            let ingest = Ingest::new(
                format!("{}-{}", c.id, s.id),
                &op,
                "personal-chat",
                Content::conversation(text),
            )
            .reference_time(s.date)
            .source_description(format!("session {}", s.id));
            let stored = client.ingest(&ingest).await?;
            for r in stored {
                session_of.insert(r.episode, s.id.clone());
            }
        }
        ingestion.push(IngestResult {
            conversation: c.id.clone(),
            sessions: c.sessions.len(),
            wall_ms: started.elapsed().as_secs_f64() * 1e3,
        });
        let index = options.baseline.then(|| Bm25::new(docs));
        for q in c.questions.iter().take(budget) {
            budget -= 1;
            let mut result = ask(client, &op, c, q, &session_of, options, &recall_options).await?;
            result.baseline = index.as_ref().map(|i| baseline(i, &texts, q, options));
            questions.push(result);
        }
    }
    Ok(RunResult {
        dataset: dataset.name.clone(),
        ingestion,
        questions,
    })
}

async fn ask(
    client: &dyn Client,
    op: &OperatorId,
    c: &Conversation,
    q: &Question,
    session_of: &BTreeMap<Uuid, String>,
    options: &RunOptions,
    recall_options: &RecallOptions,
) -> Result<QuestionResult> {
    let started = Instant::now();
    let recalled = recall(
        client,
        op,
        &c.agent,
        Some(&c.id),
        &q.question,
        recall_options,
    )
    .await;
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut result = QuestionResult {
        question: q.clone(),
        conversation: c.id.clone(),
        surfaced: Vec::new(),
        recall_at: BTreeMap::new(),
        context_correct: None,
        answer: None,
        answer_correct: None,
        judge_correct: None,
        latency_ms,
        context: String::new(),
        context_tokens: 0,
        error: None,
        baseline: None,
    };
    let recalled = match recalled {
        Ok(r) => r,
        Err(e) => {
            result.error = Some(e.to_string());
            return Ok(result);
        }
    };
    for fact in &recalled.facts {
        let Some(f) = fact.hit.as_fact() else {
            continue;
        };
        for s in &f.sources {
            if let Some(sid) = session_of.get(&s.episode)
                && !result.surfaced.contains(sid)
            {
                result.surfaced.push(sid.clone());
            }
        }
    }
    result.recall_at = recall_at(q, &result.surfaced, &options.ks);
    let n = options.context_k.max(1).min(recalled.facts.len());
    let block = render_block(&recalled.facts[..n]);
    result.context_tokens = estimate_tokens(&block);
    result.context_correct = context_supports(q, &block);
    if let Some(model) = &options.model {
        let answer = answer(model.as_ref(), q, &block).await?;
        result.answer_correct = Some(answer_correct(q, &answer));
        result.judge_correct = Some(judge(model.as_ref(), q, &answer).await?);
        result.answer = Some(answer);
    }
    result.context = block;
    Ok(result)
}

async fn answer(model: &dyn LanguageModel, q: &Question, block: &str) -> Result<String> {
    let schema = OutputSchema::new(
        "eval_answer",
        json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The short answer."}},
            "required": ["answer"],
            "additionalProperties": false,
        }),
    );
    let when = q.date.map_or_else(String::new, |d| {
        format!("The question is asked on {}.\n", d.to_fact_text())
    });
    let request = GenerateRequest::new(schema)
        .system(ANSWER_SYSTEM)
        .user(format!("{block}\n\n{when}Question: {}", q.question))
        .label("eval_answer");
    let g = model.generate(&request).await?;
    Ok(g.value["answer"].as_str().unwrap_or_default().to_owned())
}

async fn judge(model: &dyn LanguageModel, q: &Question, answer: &str) -> Result<bool> {
    let schema = OutputSchema::new(
        "eval_judge",
        json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "One sentence."},
                "correct": {"type": "boolean"},
            },
            "required": ["reason", "correct"],
            "additionalProperties": false,
        }),
    );
    let gold = match q.scoring {
        Scoring::Abstention => "The information is not available in the conversations.".to_owned(),
        _ => q.answers.join(" / "),
    };
    let request = GenerateRequest::new(schema)
        .system(JUDGE_SYSTEM)
        .user(format!(
            "Question: {}\nGold answer: {gold}\nAnswer to grade: {answer}",
            q.question
        ))
        .label("eval_judge");
    let g = model.generate(&request).await?;
    Ok(g.value["correct"].as_bool().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scoring: Scoring, answers: &[&str], absent: &[&str]) -> Question {
        Question {
            id: "q".into(),
            kind: "k".into(),
            question: "?".into(),
            answers: answers.iter().map(|s| s.to_string()).collect(),
            evidence: vec![],
            date: None,
            scoring,
            absent: absent.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn answers_are_checked_exactly_by_containment_or_as_abstentions() {
        let exact = q(Scoring::Exact, &["Marta"], &[]);
        assert!(answer_correct(&exact, " marta. "));
        assert!(!answer_correct(&exact, "Marta Silva"));
        assert!(context_supports(&exact, "- My tutor is Marta (created …)").unwrap());
        assert!(!context_supports(&exact, "- Martina teaches").unwrap());
        let contains = q(Scoring::Contains, &["Dr. Okafor", "Okafor"], &[]);
        assert!(answer_correct(&contains, "Your vet is Dr Okafor."));
        assert!(!answer_correct(&contains, "I don't know."));
        assert!(context_supports(&contains, "valid from 2024-04-20 … Okafor").unwrap());
        let abstain = q(Scoring::Abstention, &["never said"], &["cat"]);
        assert!(answer_correct(&abstain, "I don't know."));
        assert!(answer_correct(&abstain, "That was not mentioned."));
        assert!(!answer_correct(&abstain, "Whiskers"));
        assert_eq!(
            context_supports(&abstain, "- a beagle named Biscuit"),
            Some(true)
        );
        assert_eq!(context_supports(&abstain, "- my cat Tom"), Some(false));
        assert_eq!(
            context_supports(&q(Scoring::Abstention, &["x"], &[]), "any"),
            None
        );
    }
}
