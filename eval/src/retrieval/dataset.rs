//! Loaders for the LongMemEval and LoCoMo JSON formats, into one shape:
//! [`Dataset`] → [`Conversation`]s (sessions with their dates, questions with their
//! evidence sessions).
//!
//! **LongMemEval** (Wu et al., 2024; `longmemeval_s.json`, `longmemeval_m.json`,
//! `longmemeval_oracle.json`): a JSON array of questions, each with its own haystack:
//! `question_id` (abstention questions end in `_abs`), `question_type`, `question`,
//! `answer`, `question_date`, `haystack_session_ids`, `haystack_dates`,
//! `haystack_sessions` (lists of `{role: user|assistant, content}`) and
//! `answer_session_ids`. Dates read `2023/05/30 (Tue) 23:40` (taken as UTC).
//! Questions with the same haystack (the same session ids in the same order) share
//! one conversation, ingested once. The human is named `User`, the agent `Assistant`.
//!
//! **LoCoMo** (Maharana et al., 2024; `locomo10.json`): a JSON array of samples:
//! `sample_id`, `conversation` (`speaker_a`, `speaker_b`, `session_<n>` lists of
//! `{speaker, dia_id, text, blip_caption?}` and `session_<n>_date_time` such as
//! `1:56 pm on 8 May, 2023`) and `qa` (`question`, `answer`, `evidence` turn ids such
//! as `D1:3`, `category` 1–5, `adversarial_answer` for category 5). The first speaker
//! is the human, the second the agent; a shared photo is kept as
//! ` [shares a photo: <caption>]`. Evidence turns give their sessions (`D1:3` →
//! `session_1`). Categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
//! 5 adversarial (abstention).
//!
//! **Extensions** (the shipped synthetic set uses them; the public sets have none):
//! a LongMemEval question may carry `scoring` (`exact`, `contains` or
//! `abstention`), `answer_alternatives` (further accepted answers) and `absent`
//! (words whose presence in the recalled context means memory claims what was never
//! said: the offline check of an abstention question). Without `scoring`, a question
//! is scored `abstention` when it is one (`_abs`, category 5), else `contains`.

use std::collections::BTreeMap;
use std::path::Path;

use gralkor::agent::turn::{Message, Turn};
use gralkor::storage::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{EvalError, Result};

/// The two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// LongMemEval.
    LongMemEval,
    /// LoCoMo.
    LoCoMo,
}

/// How a question's answer is checked deterministically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scoring {
    /// A model's answer equals an accepted answer (under
    /// [`normalise`](crate::text::normalise)); a recalled context contains one as a
    /// whole phrase.
    Exact,
    /// The answer (or context) contains an accepted answer (normalised substring).
    Contains,
    /// Nothing in memory answers it: a model's answer says so; a recalled context
    /// contains none of the question's `absent` words.
    Abstention,
}

/// A loaded dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// A name for the report (the file name).
    pub name: String,
    /// The format it was read from.
    pub format: Format,
    /// The conversations, in file order.
    pub conversations: Vec<Conversation>,
}

/// Sessions between a human and an agent, and questions about them.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// Unique within the dataset.
    pub id: String,
    /// The human's name in the transcripts.
    pub human: String,
    /// The agent's name in the transcripts.
    pub agent: String,
    /// The sessions, in order.
    pub sessions: Vec<Session>,
    /// The questions, in order.
    pub questions: Vec<Question>,
}

/// One session: turns at a date.
#[derive(Debug, Clone)]
pub struct Session {
    /// Unique within the conversation.
    pub id: String,
    /// When it happened.
    pub date: Timestamp,
    /// The turns.
    pub turns: Vec<Turn>,
}

/// One question.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    /// Unique within the dataset.
    pub id: String,
    /// Its kind (`temporal-reasoning`, `multi-hop`, …).
    pub kind: String,
    /// The question.
    pub question: String,
    /// The accepted answers (the gold answer first).
    pub answers: Vec<String>,
    /// The sessions that hold the answer.
    pub evidence: Vec<String>,
    /// When it is asked, if known.
    pub date: Option<Timestamp>,
    /// How it is checked.
    pub scoring: Scoring,
    /// For an offline abstention check: words the recalled context must not hold.
    pub absent: Vec<String>,
}

/// Reads a dataset of either format: `format`, or when `None` the format the
/// file's shape says (LoCoMo samples have `conversation` and `qa`).
pub fn load(path: &Path, format: Option<Format>) -> Result<Dataset> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EvalError::io(format!("reading {}", path.display()), e))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| EvalError::data(path, "dataset", format!("is not JSON: {e}")))?;
    let format = format.unwrap_or_else(|| {
        let first = value.as_array().and_then(|a| a.first());
        if first.is_some_and(|v| v.get("conversation").is_some() && v.get("qa").is_some()) {
            Format::LoCoMo
        } else {
            Format::LongMemEval
        }
    });
    let name = path
        .file_name()
        .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
    let conversations = match format {
        Format::LongMemEval => longmemeval(path, &value)?,
        Format::LoCoMo => locomo(path, &value)?,
    };
    Ok(Dataset {
        name,
        format,
        conversations,
    })
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(text_of)
        .collect()
}

fn ts(y: i64, mo: u32, d: u32, h: u32, mi: u32) -> Option<Timestamp> {
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 {
        return None;
    }
    Timestamp::parse_rfc3339(&format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:00Z")).ok()
}

/// `2023/05/30 (Tue) 23:40` (the weekday and the time optional) as UTC.
pub fn parse_longmemeval_date(s: &str) -> Option<Timestamp> {
    let mut parts = s.split_whitespace();
    let date = parts.next()?;
    let mut ymd = date.split('/');
    let y = ymd.next()?.parse().ok()?;
    let mo = ymd.next()?.parse().ok()?;
    let d = ymd.next()?.parse().ok()?;
    let time = parts.find(|p| p.contains(':'));
    let (h, mi) = match time {
        Some(t) => {
            let (h, m) = t.split_once(':')?;
            (h.parse().ok()?, m.parse().ok()?)
        }
        None => (0, 0),
    };
    ts(y, mo, d, h, mi)
}

/// `1:56 pm on 8 May, 2023` as UTC.
pub fn parse_locomo_date(s: &str) -> Option<Timestamp> {
    let (time, date) = s.split_once(" on ")?;
    let mut t = time.split_whitespace();
    let clock = t.next()?;
    let half = t.next().map(str::to_ascii_lowercase);
    let (h, mi) = clock.split_once(':')?;
    let (mut h, mi): (u32, u32) = (h.parse().ok()?, mi.parse().ok()?);
    match half.as_deref() {
        Some("pm") if h < 12 => h += 12,
        Some("am") if h == 12 => h = 0,
        _ => {}
    }
    let cleaned = date.replace(',', " ");
    let mut d = cleaned.split_whitespace();
    let day = d.next()?.parse().ok()?;
    let month = d.next()?.to_ascii_lowercase();
    let year = d.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mo = MONTHS.iter().position(|m| month.starts_with(m))? as u32 + 1;
    ts(year, mo, day, h, mi)
}

/// Turns from role-tagged messages: a turn opens at each user message and holds the
/// agent messages after it.
fn turns(messages: impl IntoIterator<Item = (bool, String)>) -> Vec<Turn> {
    let mut out: Vec<Vec<Message>> = Vec::new();
    for (is_user, text) in messages {
        if text.trim().is_empty() {
            continue;
        }
        if is_user || out.is_empty() {
            out.push(Vec::new());
        }
        let m = if is_user {
            Message::user(text)
        } else {
            Message::assistant(text)
        };
        out.last_mut().expect("a turn").push(m);
    }
    out.into_iter().map(Turn::new).collect()
}

fn scoring(v: &Value, abstention: bool, path: &Path, field: &str) -> Result<Scoring> {
    match v.get("scoring") {
        None => Ok(if abstention {
            Scoring::Abstention
        } else {
            Scoring::Contains
        }),
        Some(s) => serde_json::from_value(s.clone()).map_err(|_| {
            EvalError::data(
                path,
                format!("{field}.scoring"),
                "must be exact, contains or abstention",
            )
        }),
    }
}

fn longmemeval(path: &Path, value: &Value) -> Result<Vec<Conversation>> {
    let entries = value
        .as_array()
        .ok_or_else(|| EvalError::data(path, "dataset", "must be a JSON array of questions"))?;
    let mut conversations: Vec<Conversation> = Vec::new();
    let mut by_haystack: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let field = |f: &str| format!("[{i}].{f}");
        let need = |f: &str| -> Result<String> {
            e.get(f)
                .and_then(text_of)
                .ok_or_else(|| EvalError::data(path, field(f), "is missing"))
        };
        let id = need("question_id")?;
        let ids = strings(e.get("haystack_session_ids"));
        let index = match by_haystack.get(&ids) {
            Some(&k) => k,
            None => {
                let dates = strings(e.get("haystack_dates"));
                let sessions = e
                    .get("haystack_sessions")
                    .and_then(Value::as_array)
                    .ok_or_else(|| {
                        EvalError::data(path, field("haystack_sessions"), "is missing")
                    })?;
                if dates.len() != ids.len() || sessions.len() != ids.len() {
                    return Err(EvalError::data(
                        path,
                        field("haystack_sessions"),
                        "must have one id and one date per session",
                    ));
                }
                let mut out = Vec::with_capacity(ids.len());
                for (k, ((sid, date), s)) in ids.iter().zip(&dates).zip(sessions).enumerate() {
                    let date = parse_longmemeval_date(date).ok_or_else(|| {
                        EvalError::data(
                            path,
                            field(&format!("haystack_dates[{k}]")),
                            "is no `YYYY/MM/DD (Day) HH:MM` date",
                        )
                    })?;
                    let messages = s.as_array().into_iter().flatten().map(|m| {
                        (
                            m.get("role").and_then(Value::as_str) == Some("user"),
                            m.get("content").and_then(text_of).unwrap_or_default(),
                        )
                    });
                    out.push(Session {
                        id: sid.clone(),
                        date,
                        turns: turns(messages),
                    });
                }
                conversations.push(Conversation {
                    id: format!("lme-{}", conversations.len() + 1),
                    human: "User".into(),
                    agent: "Assistant".into(),
                    sessions: out,
                    questions: Vec::new(),
                });
                by_haystack.insert(ids, conversations.len() - 1);
                conversations.len() - 1
            }
        };
        let abstention = id.ends_with("_abs");
        let mut answers = vec![need("answer")?];
        answers.extend(strings(e.get("answer_alternatives")));
        let question = Question {
            kind: e
                .get("question_type")
                .and_then(text_of)
                .unwrap_or_else(|| "unknown".into()),
            question: need("question")?,
            answers,
            evidence: strings(e.get("answer_session_ids")),
            date: e
                .get("question_date")
                .and_then(Value::as_str)
                .and_then(parse_longmemeval_date),
            scoring: scoring(e, abstention, path, &format!("[{i}]"))?,
            absent: strings(e.get("absent")),
            id,
        };
        conversations[index].questions.push(question);
    }
    Ok(conversations)
}

fn locomo(path: &Path, value: &Value) -> Result<Vec<Conversation>> {
    let samples = value
        .as_array()
        .ok_or_else(|| EvalError::data(path, "dataset", "must be a JSON array of samples"))?;
    let mut out = Vec::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        let field = |f: &str| format!("[{i}].{f}");
        let id = s
            .get("sample_id")
            .and_then(text_of)
            .unwrap_or_else(|| format!("locomo-{}", i + 1));
        let c = s
            .get("conversation")
            .and_then(Value::as_object)
            .ok_or_else(|| EvalError::data(path, field("conversation"), "is missing"))?;
        let speaker = |k: &str| -> Result<String> {
            c.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    EvalError::data(path, field(&format!("conversation.{k}")), "is missing")
                })
        };
        let (human, agent) = (speaker("speaker_a")?, speaker("speaker_b")?);
        let mut numbers: Vec<u32> = c
            .keys()
            .filter_map(|k| k.strip_prefix("session_"))
            .filter_map(|n| n.parse().ok())
            .collect();
        numbers.sort_unstable();
        let mut sessions = Vec::with_capacity(numbers.len());
        for n in numbers {
            let key = format!("session_{n}");
            let date_key = format!("{key}_date_time");
            let date = c
                .get(&date_key)
                .and_then(Value::as_str)
                .and_then(parse_locomo_date)
                .ok_or_else(|| {
                    EvalError::data(
                        path,
                        field(&format!("conversation.{date_key}")),
                        "is no `h:mm am on D Month, YYYY` date",
                    )
                })?;
            let messages = c[&key].as_array().into_iter().flatten().map(|t| {
                let mut text = t.get("text").and_then(text_of).unwrap_or_default();
                if let Some(caption) = t.get("blip_caption").and_then(Value::as_str) {
                    text.push_str(&format!(" [shares a photo: {caption}]"));
                }
                (
                    t.get("speaker").and_then(Value::as_str) == Some(human.as_str()),
                    text,
                )
            });
            sessions.push(Session {
                id: key,
                date,
                turns: turns(messages),
            });
        }
        let mut questions = Vec::new();
        for (k, q) in s
            .get("qa")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let category = q.get("category").and_then(Value::as_i64).unwrap_or(0);
            let kind = match category {
                1 => "multi-hop",
                2 => "temporal",
                3 => "open-domain",
                4 => "single-hop",
                5 => "adversarial",
                _ => "unknown",
            };
            let abstention = category == 5;
            let mut evidence: Vec<String> = Vec::new();
            for e in strings(q.get("evidence")) {
                for part in e.split([';', ',', ' ']).filter(|p| !p.is_empty()) {
                    let session = part
                        .trim_start_matches('D')
                        .split(':')
                        .next()
                        .and_then(|n| n.parse::<u32>().ok())
                        .map(|n| format!("session_{n}"));
                    if let Some(sid) = session
                        && !evidence.contains(&sid)
                    {
                        evidence.push(sid);
                    }
                }
            }
            let answer = q.get("answer").and_then(text_of);
            questions.push(Question {
                id: format!("{id}-q{}", k + 1),
                kind: kind.into(),
                question: q.get("question").and_then(text_of).ok_or_else(|| {
                    EvalError::data(path, field(&format!("qa[{k}].question")), "is missing")
                })?,
                answers: answer.into_iter().collect(),
                evidence,
                date: None,
                scoring: scoring(q, abstention, path, &field(&format!("qa[{k}]")))?,
                absent: strings(q.get("absent")),
            });
        }
        out.push(Conversation {
            id,
            human,
            agent,
            sessions,
            questions,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates_of_both_formats_parse_as_utc() {
        let t = |s: &str| Timestamp::parse_rfc3339(s).unwrap();
        assert_eq!(
            parse_longmemeval_date("2023/05/30 (Tue) 23:40"),
            Some(t("2023-05-30T23:40:00Z"))
        );
        assert_eq!(
            parse_longmemeval_date("2023/05/30"),
            Some(t("2023-05-30T00:00:00Z"))
        );
        assert_eq!(
            parse_locomo_date("1:56 pm on 8 May, 2023"),
            Some(t("2023-05-08T13:56:00Z"))
        );
        assert_eq!(
            parse_locomo_date("12:09 am on 13 September, 2023"),
            Some(t("2023-09-13T00:09:00Z"))
        );
        assert_eq!(parse_locomo_date("yesterday"), None);
        assert_eq!(parse_longmemeval_date("2023/13/01 (Mon) 10:00"), None);
    }

    #[test]
    fn a_locomo_sample_becomes_a_conversation_with_evidence_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("locomo.json");
        let sample = json!([{
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Mia", "speaker_b": "Noor",
                "session_2_date_time": "9:00 am on 2 June, 2023",
                "session_2": [{"speaker": "Noor", "dia_id": "D2:1", "text": "Back from Oslo!"}],
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Mia", "dia_id": "D1:1", "text": "I adopted a cat."},
                    {"speaker": "Noor", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a grey cat"}
                ]
            },
            "qa": [
                {"question": "What did Mia adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
                {"question": "Where was Noor?", "answer": 2023, "evidence": ["D2:1; D1:2"], "category": 2},
                {"question": "What is Mia's dog called?", "adversarial_answer": "Rex", "evidence": [], "category": 5}
            ]
        }]);
        std::fs::write(&file, sample.to_string()).unwrap();
        let d = load(&file, None).unwrap();
        assert_eq!(d.format, Format::LoCoMo);
        let c = &d.conversations[0];
        assert_eq!((c.human.as_str(), c.agent.as_str()), ("Mia", "Noor"));
        assert_eq!(
            c.sessions.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["session_1", "session_2"]
        );
        assert_eq!(
            c.sessions[0].turns.len(),
            1,
            "the agent's reply joins the human's turn"
        );
        assert!(
            c.sessions[0].turns[0].messages()[1]
                .content
                .ends_with("[shares a photo: a grey cat]")
        );
        assert_eq!(c.questions[1].evidence, ["session_2", "session_1"]);
        assert_eq!(c.questions[1].answers, ["2023"]);
        assert_eq!(c.questions[2].scoring, Scoring::Abstention);
        assert_eq!(c.questions[0].scoring, Scoring::Contains);
        assert_eq!(c.questions[0].kind, "single-hop");
    }

    #[test]
    fn longmemeval_questions_sharing_a_haystack_share_a_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lme.json");
        let entry = |id: &str, ids: Value| {
            json!({
                "question_id": id, "question_type": "single-session-user", "question": "Q?", "answer": "A",
                "question_date": "2023/06/01 (Thu) 10:00",
                "haystack_session_ids": ids, "haystack_dates": ["2023/05/30 (Tue) 23:40"],
                "haystack_sessions": [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]],
                "answer_session_ids": ["s1"]
            })
        };
        let data = json!([
            entry("q1", json!(["s1"])),
            entry("q2_abs", json!(["s1"])),
            entry("q3", json!(["s2"]))
        ]);
        std::fs::write(&file, data.to_string()).unwrap();
        let d = load(&file, None).unwrap();
        assert_eq!(d.format, Format::LongMemEval);
        assert_eq!(d.conversations.len(), 2);
        assert_eq!(d.conversations[0].questions.len(), 2);
        assert_eq!(d.conversations[0].questions[1].scoring, Scoring::Abstention);
        let bad = json!([{"question_id": "q", "question": "Q", "answer": "A",
            "haystack_session_ids": ["s1"], "haystack_dates": ["soon"], "haystack_sessions": [[]]}]);
        std::fs::write(&file, bad.to_string()).unwrap();
        let err = load(&file, Some(Format::LongMemEval))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`[0].haystack_dates[0]` is no"), "{err}");
    }
}
