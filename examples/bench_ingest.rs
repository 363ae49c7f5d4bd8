//! Ingestion throughput and model cost on scripted worlds, against a fake
//! OpenAI-compatible provider on loopback that answers like a perfect model.
//!
//! ```text
//! cargo run --release --example bench_ingest                # every world, 200 episodes, 200 ms a call, 20 ms an embedding
//! cargo run --release --example bench_ingest -- 80 100 20 paraphrase   # episodes, model ms, embedding ms, one world
//! BENCH_GRAPHS=8 cargo run --release --example bench_ingest -- 200 200 20 today  # only the 8-graph run
//! ```
//!
//! The worlds: 40 people, 15 companies and 10 cities; episode `e` happens on day `e`
//! from 2024-01-01, and the first 40 introduce each person's job and home.
//!
//! * `today` — the world round two was tuned on: exact restatements ("Ana Lima still
//!   works at Acme Robotics."), 10 paraphrases ("… is employed by …"), 15
//!   acquaintances (some restated), 10 job changes and 10 moves.
//! * `paraphrase` — generated from another seed: most episodes restate a known job,
//!   home or both in other words (six ways for a job — other relation names, the
//!   company as the subject, "works for" — and five for a home), one in four with a
//!   "since DATE" added; acquaintances in three wordings; 12 job changes, 12 moves.
//! * `dated` — every restatement adds a start date ("… since 2023-05-14", no later
//!   than the known start), and job changes and moves happened some days before the
//!   episode that reports them ("On 2024-03-02, Ana Lima quit …"), so the old fact
//!   must end at the successor's stated start, not at the episode's time.
//!
//! The fake provider answers every schema as a perfect model would, from what the
//! prompt shows: extraction from the episode (a fact starts at its stated date, else
//! at the reference time); when the prompt lists known facts, for each extracted fact
//! the known fact with the same meaning (`restates`) and those it contradicts (another
//! job or home of the same person); entity resolution by equal names; fact resolution
//! by meaning; summaries by a short sentence. Model answers come after the model
//! delay, embeddings after the embedding delay. It counts requests per schema.
//!
//! Reading the 8-graph row: when `rest p50` (time beyond the delays) is far above
//! `CPU ms/ep` + `srv CPU` (what this process and the server actually spend per
//! episode), the episodes are waiting for a core, not for the database. Measured on
//! 2 shared cores (debug build, `today`, 8 graphs): at load 17–21, 9–14 episodes/s,
//! p50 460–700 ms, rest p50 240–480 ms against 13–16 + 7–9 CPU ms/ep; at load 2–4,
//! 27–30 episodes/s, p50 255–275 ms, rest p50 35–55 ms. Four write connections (one
//! per graph hash) instead of one changed neither figure beyond the noise (27.8–30.0
//! vs 27.0–29.9 episodes/s, back to back), so the handle keeps one.
//!
//! The real OpenAI client (HTTP, limiter, retries) talks to it; the real engine writes
//! to an embedded FalkorDB in a temporary directory. Per world, for one graph, then for
//! 8 graphs at once (each its own copy of the world), it prints episodes per second,
//! model calls and embedding requests per episode, the episodes that took 1, 2 and 3+
//! calls, p50/p95 latency, process CPU milliseconds per episode (user + system of this
//! process — engine, client and fake provider), the embedded FalkorDB's own CPU
//! milliseconds per episode (its process, all threads; `-` on a cluster), the p50 of
//! what an episode spends outside the model and embedding delays (database round trips,
//! queueing and client CPU: where the time goes beyond the floor), database round trips per episode as `IngestUsage` counts them, calls per
//! episode by pipeline step and requests by schema, and the identical-graph check
//! against the world's ground truth: facts (endpoints, relation, text, valid/invalid
//! times, expiry and supporting episodes), entities, duplicates, and invalidations at
//! the successor's valid time.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb, Params, Value as Cell};
use gralkor::graph::{self, AddEpisode, Engine, SourceKind, Timestamp};
use gralkor::llm::openai::OpenAi;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

mod support;
use support::{Rng, percentile};

const DIM: usize = 64;
const DAY_MICROS: i64 = 86_400 * 1_000_000;

#[rustfmt::skip]
const FIRST: [&str; 40] = [
    "Ana", "Bruno", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    "Kemal", "Lucia", "Marek", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamara",
    "Umar", "Vera", "Wiktor", "Ximena", "Yusuf", "Zofia", "Anders", "Beatriz", "Cyril", "Daria",
    "Emil", "Fatima", "Gustav", "Hanna", "Igor", "Julia", "Karim", "Lena", "Mateo", "Nora",
];
#[rustfmt::skip]
const LAST: [&str; 40] = [
    "Lima", "Okafor", "Silva", "Novak", "Rossi", "Haddad", "Berg", "Tanaka", "Costa", "Weber",
    "Yilmaz", "Moreno", "Kowalski", "Petrova", "Lindqvist", "Sharma", "Dubois", "Marin",
    "Olsen", "Ivanova", "Farouk", "Horvath", "Zielinski", "Reyes", "Demir", "Nowak",
    "Andersen", "Ferreira", "Laurent", "Sokolova", "Fischer", "Rahman", "Nilsson", "Kruger",
    "Volkov", "Hoffmann", "Mansour", "Brandt", "Herrera", "Jansen",
];
#[rustfmt::skip]
const COMPANIES: [&str; 15] = [
    "Acme Robotics", "Globex Systems", "Initech Labs", "Umbrella Health", "Stark Industries",
    "Wayne Logistics", "Cyberdyne Software", "Soylent Foods", "Tyrell Genetics",
    "Hooli Search", "Vandelay Imports", "Wonka Confections", "Oscorp Energy",
    "Massive Dynamic", "Aperture Science",
];
#[rustfmt::skip]
const CITIES: [&str; 10] = [
    "Lisbon", "Madrid", "Berlin", "Vienna", "Prague", "Dublin", "Warsaw", "Zurich", "Munich",
    "Geneva",
];

/// One fact of an extraction: (source, relation, target, text, valid_at).
type Said = (String, &'static str, String, String, Option<Timestamp>);

/// The extraction of one episode text: entity names and facts; a fact without a
/// stated start starts at the reference time (`None` here).
#[derive(Clone)]
struct Script {
    entities: Vec<String>,
    facts: Vec<Said>,
}

/// A fact of the ground truth.
#[derive(Clone, Debug)]
struct TruthFact {
    source: String,
    relation: &'static str,
    target: String,
    text: String,
    valid_at: Timestamp,
    invalid_at: Option<Timestamp>,
    support: usize,
}

/// The scripted world: episodes in order, their extractions, and the ground truth.
struct World {
    name: &'static str,
    episodes: Vec<(String, Timestamp)>,
    scripts: HashMap<String, Script>,
    facts: Vec<TruthFact>,
    entities: Vec<String>,
    /// Episodes by kind, for the report.
    mix: BTreeMap<&'static str, usize>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Restate,
    Paraphrase,
    Knows,
    Job,
    Move,
}

/// The world variants the bench runs.
const VARIANTS: [&str; 3] = ["today", "paraphrase", "dated"];

/// Ways to restate a job: (episode text, extracted fact text, relation, whether the
/// company is the fact's source). `{p}` the person, `{c}` the company.
#[rustfmt::skip]
const JOB_SAYINGS: [(&str, &str, &str, bool); 6] = [
    ("{p} is employed by {c}.", "{p} is employed by {c}.", "EMPLOYED_BY", false),
    ("{p} has a job at {c}.", "{p} has a job at {c}.", "HAS_JOB_AT", false),
    ("{p} works for {c} these days.", "{p} works for {c}.", "WORKS_FOR", false),
    ("{c} employs {p}.", "{c} employs {p}.", "EMPLOYS", true),
    ("{p} is on the staff of {c}.", "{p} is on the staff of {c}.", "STAFF_OF", false),
    ("{p} still works at {c}.", "{p} works at {c}.", "WORKS_AT", false),
];
/// Ways to restate a home: `{p}` the person, `{c}` the city.
#[rustfmt::skip]
const HOME_SAYINGS: [(&str, &str, &str, bool); 5] = [
    ("{p} resides in {c}.", "{p} resides in {c}.", "RESIDES_IN", false),
    ("{p} is based in {c}.", "{p} is based in {c}.", "BASED_IN", false),
    ("{p} calls {c} home.", "{p} calls {c} home.", "CALLS_HOME", false),
    ("{c} is where {p} lives.", "{p} lives in {c}.", "LIVES_IN", false),
    ("{p} still lives in {c}.", "{p} lives in {c}.", "LIVES_IN", false),
];
/// Ways to restate an acquaintance: `{p}` and `{c}` the two people.
#[rustfmt::skip]
const KNOWS_SAYINGS: [(&str, &str, &str, bool); 3] = [
    ("{p} is acquainted with {c}.", "{p} is acquainted with {c}.", "ACQUAINTED_WITH", false),
    ("{p} and {c} know each other.", "{p} knows {c}.", "KNOWS", false),
    ("{p} knows {c}.", "{p} knows {c}.", "KNOWS", false),
];

/// What a fact says: (subject, kind, object).
type Meaning = (String, &'static str, String);

/// The meaning of a fact text in this world: (subject, kind, object), the date a
/// "… since DATE" adds stripped.
fn meaning(text: &str) -> Option<Meaning> {
    let text = text.trim().trim_end_matches('.');
    let text = text.split(" since ").next().unwrap_or(text);
    for (verb, kind, swapped) in [
        (" works at ", "job", false),
        (" has worked at ", "job", false),
        (" is employed by ", "job", false),
        (" has a job at ", "job", false),
        (" works for ", "job", false),
        (" employs ", "job", true),
        (" is on the staff of ", "job", false),
        (" lives in ", "home", false),
        (" has lived in ", "home", false),
        (" resides in ", "home", false),
        (" is based in ", "home", false),
        (" calls ", "home", false),
        (" knows ", "knows", false),
        (" is acquainted with ", "knows", false),
    ] {
        if let Some((s, o)) = text.split_once(verb) {
            let o = o.trim_end_matches(" home");
            let (s, o) = if swapped { (o, s) } else { (s, o) };
            return Some((s.to_owned(), kind, o.to_owned()));
        }
    }
    None
}

impl World {
    fn empty(name: &'static str) -> World {
        World {
            name,
            episodes: Vec::new(),
            scripts: HashMap::new(),
            facts: Vec::new(),
            entities: Vec::new(),
            mix: BTreeMap::new(),
        }
    }

    fn people() -> Vec<String> {
        (0..40)
            .map(|i| format!("{} {}", FIRST[i], LAST[i]))
            .collect()
    }

    fn of(name: &str, episodes: usize) -> World {
        match name {
            "paraphrase" => World::generated("paraphrase", episodes, 0x9a7a_2027),
            "dated" => World::generated("dated", episodes, 0xda7e_2027),
            _ => World::today(episodes),
        }
    }

    /// The world the round-two bench was tuned on.
    fn today(episodes: usize) -> World {
        let people = World::people();
        let base: Timestamp = "2024-01-01T00:00:00Z".parse().expect("time");
        let mut w = World::empty("today");
        let mut rng = Rng(0x5eed_2026);
        // Per person: indices of their current job and home facts, and their history.
        let mut job: Vec<usize> = Vec::new();
        let mut home: Vec<usize> = Vec::new();
        let mut worked: Vec<Vec<usize>> = vec![Vec::new(); 40];
        let mut lived: Vec<Vec<usize>> = vec![Vec::new(); 40];
        let mut knows: HashMap<(usize, usize), usize> = HashMap::new();
        // The contradictions and the other kinds, placed after the introductions.
        let rest = episodes.saturating_sub(40);
        let mut kinds = vec![Kind::Restate; rest];
        let mut slots: Vec<usize> = (0..rest).collect();
        for (kind, n) in [
            (Kind::Job, 10),
            (Kind::Move, 10),
            (Kind::Knows, 15),
            (Kind::Paraphrase, 10),
        ] {
            for _ in 0..n.min(slots.len()) {
                let s = slots.swap_remove(rng.below(slots.len()));
                kinds[s] = kind;
            }
        }
        for e in 0..episodes {
            let at = Timestamp(base.0 + e as i64 * DAY_MICROS);
            let (text, script, label) = if e < 40.min(episodes) {
                let (c, y) = (rng.below(COMPANIES.len()), rng.below(CITIES.len()));
                let p = &people[e];
                worked[e].push(c);
                lived[e].push(y);
                job.push(w.new_fact(p, "WORKS_AT", COMPANIES[c], at));
                home.push(w.new_fact(p, "LIVES_IN", CITIES[y], at));
                w.entity(p);
                w.entity(COMPANIES[c]);
                w.entity(CITIES[y]);
                let text = format!("{p} works at {} and lives in {}.", COMPANIES[c], CITIES[y]);
                (text, w.script_of(&[job[e], home[e]], &[]), "introduction")
            } else {
                let i = rng.below(40.min(episodes));
                let p = people[i].clone();
                match kinds[e - 40] {
                    Kind::Restate => {
                        let r = rng.below(3);
                        let ids: Vec<usize> = match r {
                            0 => vec![job[i]],
                            1 => vec![home[i]],
                            _ => vec![job[i], home[i]],
                        };
                        for &f in &ids {
                            w.facts[f].support += 1;
                        }
                        let text = match r {
                            0 => format!("{p} still works at {}.", w.facts[job[i]].target),
                            1 => format!("{p} still lives in {}.", w.facts[home[i]].target),
                            _ => format!(
                                "{p} works at {} and lives in {}.",
                                w.facts[job[i]].target, w.facts[home[i]].target
                            ),
                        };
                        (text, w.script_of(&ids, &[]), "restatement")
                    }
                    Kind::Paraphrase => {
                        let f = job[i];
                        w.facts[f].support += 1;
                        let c = w.facts[f].target.clone();
                        let said = format!("{p} is employed by {c}.");
                        let script = Script {
                            entities: vec![p.clone(), c.clone()],
                            facts: vec![(p.clone(), "WORKS_AT", c.clone(), said.clone(), None)],
                        };
                        (said, script, "paraphrase")
                    }
                    Kind::Knows => {
                        let mut j = rng.below(40.min(episodes));
                        if j == i {
                            j = (j + 1) % 40.min(episodes);
                        }
                        let (a, b) = (i.min(j), i.max(j));
                        let label = if let Some(&f) = knows.get(&(a, b)) {
                            w.facts[f].support += 1;
                            "acquaintance restated"
                        } else {
                            let f = w.new_fact(&people[a], "KNOWS", &people[b], at);
                            knows.insert((a, b), f);
                            "new acquaintance"
                        };
                        let f = knows[&(a, b)];
                        let text = format!("{} knows {}.", people[a], people[b]);
                        (text, w.script_of(&[f], &[]), label)
                    }
                    Kind::Job => {
                        let c = pick_new(&mut rng, COMPANIES.len(), &worked[i]);
                        let old = job[i];
                        w.facts[old].invalid_at = Some(at);
                        worked[i].push(c);
                        job[i] = w.new_fact(&p, "WORKS_AT", COMPANIES[c], at);
                        w.entity(COMPANIES[c]);
                        let was = w.facts[old].target.clone();
                        let text = format!("{p} left {was} and now works at {}.", COMPANIES[c]);
                        (text, w.script_of(&[job[i]], &[was]), "job change")
                    }
                    Kind::Move => {
                        let y = pick_new(&mut rng, CITIES.len(), &lived[i]);
                        let old = home[i];
                        w.facts[old].invalid_at = Some(at);
                        lived[i].push(y);
                        home[i] = w.new_fact(&p, "LIVES_IN", CITIES[y], at);
                        w.entity(CITIES[y]);
                        let was = w.facts[old].target.clone();
                        let text = format!("{p} moved from {was} to {}.", CITIES[y]);
                        (text, w.script_of(&[home[i]], &[was]), "move")
                    }
                }
            };
            *w.mix.entry(label).or_default() += 1;
            w.scripts.insert(text.clone(), script);
            w.episodes.push((text, at));
        }
        w
    }

    /// A generated world the engine was not tuned on. `paraphrase`: most episodes
    /// restate a known job, home or acquaintance in other words (other relation names,
    /// the company as the subject, "since" dates added), some change jobs and homes.
    /// `dated`: most restatements add a start date ("… since 2023-05-14"), and job
    /// changes and moves happened some days before the episode reports them, so the
    /// old fact ends at the successor's stated start, not at the episode's time.
    fn generated(name: &'static str, episodes: usize, seed: u64) -> World {
        let dated = name == "dated";
        let people = World::people();
        let base: Timestamp = "2024-01-01T00:00:00Z".parse().expect("time");
        let mut w = World::empty(name);
        let mut rng = Rng(seed);
        let n = 40.min(episodes);
        let mut job: Vec<usize> = Vec::new();
        let mut home: Vec<usize> = Vec::new();
        let mut worked: Vec<Vec<usize>> = vec![Vec::new(); 40];
        let mut lived: Vec<Vec<usize>> = vec![Vec::new(); 40];
        let mut knows: HashMap<(usize, usize), usize> = HashMap::new();
        // Facts introduced by an introduction: a restatement may date them earlier.
        let mut original: Vec<bool> = Vec::new();
        let rest = episodes.saturating_sub(n);
        let mut kinds = vec![Kind::Paraphrase; rest];
        let mut slots: Vec<usize> = (0..rest).collect();
        for (kind, k) in [
            (Kind::Job, 12),
            (Kind::Move, 12),
            (Kind::Knows, 20),
            (Kind::Restate, 20),
        ] {
            for _ in 0..k.min(slots.len()) {
                let s = slots.swap_remove(rng.below(slots.len()));
                kinds[s] = kind;
            }
        }
        let day = |t: Timestamp| t.to_rfc3339()[..10].to_owned();
        for e in 0..episodes {
            let at = Timestamp(base.0 + e as i64 * DAY_MICROS);
            let (text, script, label): (String, Script, &'static str) = if e < n {
                let (c, y) = (rng.below(COMPANIES.len()), rng.below(CITIES.len()));
                let p = &people[e];
                worked[e].push(c);
                lived[e].push(y);
                job.push(w.new_fact(p, "WORKS_AT", COMPANIES[c], at));
                home.push(w.new_fact(p, "LIVES_IN", CITIES[y], at));
                original.extend([true, true]);
                w.entity(p);
                w.entity(COMPANIES[c]);
                w.entity(CITIES[y]);
                let text = match rng.below(3) {
                    0 => format!("{p} works at {} and lives in {}.", COMPANIES[c], CITIES[y]),
                    1 => format!(
                        "Meet {p}: works at {}, lives in {}.",
                        COMPANIES[c], CITIES[y]
                    ),
                    _ => format!("{p} lives in {} and works at {}.", CITIES[y], COMPANIES[c]),
                };
                (text, w.script_of(&[job[e], home[e]], &[]), "introduction")
            } else {
                let i = rng.below(n);
                let p = people[i].clone();
                match kinds[e - n] {
                    Kind::Restate | Kind::Paraphrase => {
                        let paraphrase = kinds[e - n] == Kind::Paraphrase;
                        let which = rng.below(3);
                        let ids: Vec<usize> = match which {
                            0 => vec![job[i]],
                            1 => vec![home[i]],
                            _ => vec![job[i], home[i]],
                        };
                        let mut script = Script {
                            entities: vec![p.clone()],
                            facts: Vec::new(),
                        };
                        let mut parts = Vec::new();
                        for &f in &ids {
                            w.facts[f].support += 1;
                            let t = w.facts[f].clone();
                            let with_date = dated || rng.below(4) == 0;
                            // A restatement "since DATE" dates the fact no later than
                            // its known start.
                            let since = with_date.then(|| {
                                if original[f] {
                                    Timestamp(t.valid_at.0 - rng.below(400) as i64 * DAY_MICROS)
                                } else {
                                    t.valid_at
                                }
                            });
                            let (said, fact, relation, swapped) = if !paraphrase {
                                let verb = if t.relation == "WORKS_AT" {
                                    "works at"
                                } else {
                                    "lives in"
                                };
                                (
                                    "{p} still {v} {c}.".replace("{v}", verb),
                                    t.text.clone(),
                                    t.relation,
                                    false,
                                )
                            } else if t.relation == "WORKS_AT" {
                                let (a, b, r, s) = JOB_SAYINGS[rng.below(JOB_SAYINGS.len())];
                                (a.to_owned(), b.to_owned(), r, s)
                            } else {
                                let (a, b, r, s) = HOME_SAYINGS[rng.below(HOME_SAYINGS.len())];
                                (a.to_owned(), b.to_owned(), r, s)
                            };
                            let fill = |x: &str| x.replace("{p}", &p).replace("{c}", &t.target);
                            let (mut said, mut fact) = (fill(&said), fill(&fact));
                            if let Some(d) = since {
                                let d = day(d);
                                said = format!("{} since {d}.", said.trim_end_matches('.'));
                                fact = format!("{} since {d}.", fact.trim_end_matches('.'));
                            }
                            parts.push(said);
                            script.entities.push(t.target.clone());
                            let (s, o) = if swapped {
                                (t.target.clone(), p.clone())
                            } else {
                                (p.clone(), t.target.clone())
                            };
                            script.facts.push((s, relation, o, fact, since));
                        }
                        let label = match (paraphrase, dated) {
                            (true, false) => "paraphrase",
                            (true, true) => "dated paraphrase",
                            (false, false) => "restatement",
                            (false, true) => "dated restatement",
                        };
                        (parts.join(" "), script, label)
                    }
                    Kind::Knows => {
                        let mut j = rng.below(n);
                        if j == i {
                            j = (j + 1) % n;
                        }
                        let (a, b) = (i.min(j), i.max(j));
                        let (said, fact, relation, _) =
                            KNOWS_SAYINGS[rng.below(KNOWS_SAYINGS.len())];
                        let fill =
                            |x: &str| x.replace("{p}", &people[a]).replace("{c}", &people[b]);
                        let (said, fact) = (fill(said), fill(fact));
                        let label = if let Some(&f) = knows.get(&(a, b)) {
                            w.facts[f].support += 1;
                            "acquaintance restated"
                        } else {
                            let f = w.new_fact(&people[a], "KNOWS", &people[b], at);
                            w.facts[f].text = fact.clone();
                            w.facts[f].relation = relation;
                            knows.insert((a, b), f);
                            original.push(false);
                            "new acquaintance"
                        };
                        let script = Script {
                            entities: vec![people[a].clone(), people[b].clone()],
                            facts: vec![(
                                people[a].clone(),
                                relation,
                                people[b].clone(),
                                fact,
                                None,
                            )],
                        };
                        (said, script, label)
                    }
                    Kind::Job | Kind::Move => {
                        let is_job = kinds[e - n] == Kind::Job;
                        let (list, history, current): (&[&str], _, _) = if is_job {
                            (&COMPANIES, &mut worked[i], &mut job[i])
                        } else {
                            (&CITIES, &mut lived[i], &mut home[i])
                        };
                        let c = pick_new(&mut rng, list.len(), history);
                        history.push(c);
                        let old = *current;
                        // Dated: it happened a few days before the episode (after the
                        // old fact's start).
                        let when = if dated {
                            let back = Timestamp(at.0 - (1 + rng.below(5)) as i64 * DAY_MICROS);
                            Timestamp(back.0.max(w.facts[old].valid_at.0 + DAY_MICROS))
                        } else {
                            at
                        };
                        w.facts[old].invalid_at = Some(when);
                        let relation = if is_job { "WORKS_AT" } else { "LIVES_IN" };
                        let new = w.new_fact(&p, relation, list[c], when);
                        original.push(false);
                        if is_job {
                            job[i] = new
                        } else {
                            home[i] = new
                        }
                        w.entity(list[c]);
                        let was = w.facts[old].target.clone();
                        let mut script = w.script_of(&[new], std::slice::from_ref(&was));
                        let text = match (is_job, dated) {
                            (true, false) => format!("{p} quit {was} and joined {}.", list[c]),
                            (true, true) => {
                                format!("On {}, {p} quit {was} and joined {}.", day(when), list[c])
                            }
                            (false, false) => format!("{p} relocated from {was} to {}.", list[c]),
                            (false, true) => format!(
                                "On {}, {p} relocated from {was} to {}.",
                                day(when),
                                list[c]
                            ),
                        };
                        if dated {
                            script.facts[0].4 = Some(when);
                        }
                        (text, script, if is_job { "job change" } else { "move" })
                    }
                }
            };
            *w.mix.entry(label).or_default() += 1;
            w.scripts.insert(text.clone(), script);
            w.episodes.push((text, at));
        }
        w
    }

    fn entity(&mut self, name: &str) {
        if !self.entities.iter().any(|e| e == name) {
            self.entities.push(name.to_owned());
        }
    }

    fn new_fact(
        &mut self,
        source: &str,
        relation: &'static str,
        target: &str,
        at: Timestamp,
    ) -> usize {
        let verb = match relation {
            "WORKS_AT" => "works at",
            "LIVES_IN" => "lives in",
            _ => "knows",
        };
        self.facts.push(TruthFact {
            source: source.to_owned(),
            relation,
            target: target.to_owned(),
            text: format!("{source} {verb} {target}."),
            valid_at: at,
            invalid_at: None,
            support: 1,
        });
        self.facts.len() - 1
    }

    /// The extraction restating the ground-truth facts `ids`, also naming `others`.
    fn script_of(&self, ids: &[usize], others: &[String]) -> Script {
        let mut entities: Vec<String> = Vec::new();
        let mut facts = Vec::new();
        for &f in ids {
            let t = &self.facts[f];
            for n in [&t.source, &t.target] {
                if !entities.contains(n) {
                    entities.push(n.clone());
                }
            }
            facts.push((
                t.source.clone(),
                t.relation,
                t.target.clone(),
                t.text.clone(),
                None,
            ));
        }
        entities.extend(others.iter().cloned());
        Script { entities, facts }
    }
}

/// An index below `n` not in `used`, from a random start.
fn pick_new(rng: &mut Rng, n: usize, used: &[usize]) -> usize {
    let off = rng.below(n);
    (0..n)
        .map(|k| (k + off) % n)
        .find(|c| !used.contains(c))
        .expect("a new one")
}

/// `(number, text)` of a prompt line "`prefix`N…: text [valid_at …]" or "… (…) — …".
fn item<'a>(line: &'a str, prefix: &str) -> Option<(i64, &'a str)> {
    let rest = line.strip_prefix(prefix)?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    let n = rest[..end].parse().ok()?;
    let text = rest.split_once(": ")?.1;
    let text = text.split(" [valid_at").next()?.split(" (").next()?.trim();
    Some((n, text))
}

fn tag<'a>(prompt: &'a str, name: &str) -> &'a str {
    prompt
        .split(&format!("<{name}>"))
        .nth(1)
        .and_then(|t| t.split(&format!("</{name}>")).next())
        .unwrap_or("")
        .trim()
}

/// The known facts a combined extraction prompt shows: (number, meaning).
fn known_facts(prompt: &str) -> Vec<(i64, Option<Meaning>)> {
    tag(prompt, "KNOWN_FACTS")
        .lines()
        .filter_map(|l| item(l, "known "))
        .map(|(k, text)| (k, meaning(text)))
        .collect()
}

/// The perfect model's judgement of a new fact against an existing one: the same
/// statement (in any words), or a contradiction (another job or home of the same
/// person).
fn judge(new: &Option<Meaning>, old: &Option<Meaning>) -> (bool, bool) {
    let (Some(new), Some(old)) = (new, old) else {
        return (false, false);
    };
    let same = new == old;
    let contradicts = !same && new.1 != "knows" && old.0 == new.0 && old.1 == new.1;
    (same, contradicts)
}

/// The perfect model's answer to one request.
fn answer(world: &World, schema: &str, prompt: &str) -> Value {
    match schema {
        "extraction" => {
            let at = tag(prompt, "REFERENCE_TIME");
            let script = world.scripts.get(tag(prompt, "CURRENT_EPISODE"));
            let Some(s) = script else {
                return json!({"entities": [], "facts": []});
            };
            // With known facts shown, the schema asks per fact which one it restates
            // and which it contradicts.
            let combined = prompt.contains("<KNOWN_FACTS>");
            let known = known_facts(prompt);
            json!({
                "entities": s.entities.iter().map(|n| json!({"name": n, "type_id": 0})).collect::<Vec<_>>(),
                "facts": s.facts.iter().map(|(a, r, b, t, since)| {
                    let valid_at = since.map_or_else(|| at.to_owned(), |d| d.to_rfc3339());
                    let mut fact = json!({
                        "source": a, "target": b, "relation_type": r, "fact": t,
                        "valid_at": valid_at, "invalid_at": null,
                    });
                    if combined {
                        let new = meaning(t);
                        let mut restates = -1;
                        let mut contradicts = Vec::new();
                        for (k, old) in &known {
                            let (same, against) = judge(&new, old);
                            if same && restates == -1 {
                                restates = *k;
                            } else if against {
                                contradicts.push(*k);
                            }
                        }
                        fact["restates"] = json!(restates);
                        fact["contradicts"] = json!(contradicts);
                    }
                    fact
                }).collect::<Vec<_>>(),
            })
        }
        "entity_resolution" => {
            let mut out: Vec<Value> = Vec::new();
            let mut current: Option<String> = None;
            for line in prompt.lines() {
                if let Some((i, name)) = item(line, "item ") {
                    current = Some(name.to_lowercase());
                    out.push(json!({"id": i, "duplicate_of": -1}));
                } else if let (Some(name), Some((k, existing))) =
                    (&current, item(line, "candidate "))
                {
                    let last = out.last_mut().expect("an item");
                    if last["duplicate_of"] == -1 && existing.to_lowercase() == *name {
                        last["duplicate_of"] = json!(k);
                    }
                }
            }
            json!({"resolutions": out})
        }
        "fact_resolution" => {
            let mut out: Vec<Value> = Vec::new();
            let mut current = None;
            for line in prompt.lines() {
                if let Some((i, text)) = item(line, "new fact ") {
                    current = Some(meaning(text));
                    out.push(json!({"id": i, "duplicate_of": -1, "contradicts": []}));
                } else if let (Some(new), Some((k, text))) = (&current, item(line, "existing ")) {
                    let (same, against) = judge(new, &meaning(text));
                    let last = out.last_mut().expect("a new fact");
                    if line.contains("(same entities)") && same && last["duplicate_of"] == -1 {
                        last["duplicate_of"] = json!(k);
                    } else if against {
                        last["contradicts"]
                            .as_array_mut()
                            .expect("list")
                            .push(json!(k));
                    }
                }
            }
            json!({"facts": out})
        }
        _ => {
            let mut out = Vec::new();
            let mut current = None;
            for line in prompt.lines() {
                if let Some((i, name)) = item(line, "entity ") {
                    current = Some((i, name.to_owned()));
                } else if line == "requested: summary"
                    && let Some((i, name)) = &current
                {
                    out.push(json!({"id": i, "summary": format!("{name}, a person, place or company of the world.")}));
                }
            }
            json!({"summaries": out})
        }
    }
}

/// The fake provider: answers chat completions for the engine's four schemas and
/// embeddings after their delays, counting requests per schema.
struct FakeProvider {
    world: Arc<World>,
    model_delay: Duration,
    embed_delay: Duration,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    chat: Arc<AtomicUsize>,
}

impl Respond for FakeProvider {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let count = |schema: &str| {
            *self
                .counts
                .lock()
                .expect("counts")
                .entry(schema.to_owned())
                .or_default() += 1;
        };
        if request.url.path().ends_with("/embeddings") {
            count("(embeddings)");
            let data: Vec<Value> = body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, text)| json!({"index": i, "embedding": vector(text.as_str().unwrap_or(""))}))
                .collect();
            let reply = json!({"data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}});
            return ResponseTemplate::new(200)
                .set_body_json(reply)
                .set_delay(self.embed_delay);
        }
        self.chat.fetch_add(1, Ordering::Relaxed);
        let schema = body["response_format"]["json_schema"]["name"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        count(&schema);
        let prompt: String = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let answer = answer(&self.world, &schema, &prompt);
        let reply = json!({
            "id": "fake", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": answer.to_string(), "refusal": null}}],
            "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": 50,
                      "total_tokens": prompt.len() / 4 + 50}
        });
        ResponseTemplate::new(200)
            .set_body_json(reply)
            .set_delay(self.model_delay)
    }
}

/// A deterministic unit vector per text.
fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    for w in text.split_whitespace() {
        let h = Sha256::digest(w.to_lowercase().as_bytes());
        v[h[0] as usize % DIM] += if h[1] & 1 == 0 { 1.0 } else { -1.0 };
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / n).collect()
}

/// Per episode: latency, model calls, embedding requests, calls by step, database
/// round trips.
#[derive(Clone, Copy)]
struct Sample {
    latency: Duration,
    calls: u32,
    embeds: u32,
    steps: [u32; 4],
    round_trips: u32,
}

async fn run(engine: &Engine, world: &Arc<World>, graphs: usize, tag: &str) -> Vec<Sample> {
    let mut tasks = Vec::new();
    for g in 0..graphs {
        let (engine, world) = (engine.clone(), world.clone());
        let graph = format!("bench-{tag}-{g}");
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for (text, at) in &world.episodes {
                let request = AddEpisode::new(text.clone(), SourceKind::Text, *at);
                let start = Instant::now();
                let outcome = engine.add_episode(&graph, request).await.expect("ingest");
                let u = outcome.usage;
                out.push(Sample {
                    latency: start.elapsed(),
                    calls: u.llm_calls,
                    embeds: u.embedding_calls,
                    steps: u.steps.by_name().map(|(_, n)| n),
                    round_trips: u.db_round_trips,
                });
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    all
}

/// CPU time of this process (user + system) so far: the client, the engine and the
/// fake provider; the embedded FalkorDB is another process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF and a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time (user + system, all threads) of process `pid` so far, from
/// `/proc/<pid>/stat`; `None` where that is not readable.
fn process_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) start at state (3);
    // utime and stime are fields 14 and 15, in clock ticks.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// The comparison of one stored graph with the ground truth.
struct Check {
    facts_matched: usize,
    facts_stored: usize,
    entities_matched: usize,
    entities_stored: usize,
    duplicate_entities: usize,
    duplicate_facts: usize,
    invalidations_matched: usize,
    invalidations_expected: usize,
    differences: Vec<String>,
}

impl Check {
    fn identical(&self, world: &World) -> bool {
        self.differences.is_empty()
            && self.facts_matched == world.facts.len()
            && self.entities_matched == world.entities.len()
    }
}

/// A fact as compared: endpoints, relation, text, valid and invalid time, whether it is
/// expired, and how many episodes support it.
type Key = (
    String,
    String,
    String,
    String,
    Timestamp,
    Option<Timestamp>,
    bool,
    usize,
);

async fn check(db: &FalkorDb, graph: &str, world: &World) -> gralkor::Result<Check> {
    let nodes = db
        .ro_query(
            graph,
            "MATCH (n:Entity) RETURN n.uuid AS u, n.name AS name",
            &Params::new(),
        )
        .await?;
    let mut names: HashMap<Uuid, String> = HashMap::new();
    let mut stored_names: Vec<String> = Vec::new();
    for row in nodes.into_maps() {
        let (Some(Cell::String(u)), Some(Cell::String(n))) = (row.get("u"), row.get("name")) else {
            continue;
        };
        names.insert(Uuid::parse_str(u).unwrap_or_default(), n.clone());
        stored_names.push(n.clone());
    }
    let res = db
        .ro_query(
            graph,
            "MATCH ()-[f:RELATES_TO]->() RETURN f.uuid AS u",
            &Params::new(),
        )
        .await?;
    let ids: Vec<Uuid> = res
        .column_values("u")
        .filter_map(|v| v.as_str().and_then(|s| Uuid::parse_str(s).ok()))
        .collect();
    let stored = graph::get_facts(db, graph, &ids).await?;
    let name = |u: &Uuid| names.get(u).cloned().unwrap_or_else(|| format!("?{u}"));
    let mut got: Vec<Key> = stored
        .iter()
        .map(|f| {
            (
                name(&f.source_uuid),
                f.name.clone(),
                name(&f.target_uuid),
                f.fact.clone(),
                f.valid_at.unwrap_or_default(),
                f.invalid_at,
                f.expired_at.is_some(),
                f.episodes.len(),
            )
        })
        .collect();
    let mut want: Vec<Key> = world
        .facts
        .iter()
        .map(|f| {
            (
                f.source.clone(),
                f.relation.to_owned(),
                f.target.clone(),
                f.text.clone(),
                f.valid_at,
                f.invalid_at,
                f.invalid_at.is_some(),
                f.support,
            )
        })
        .collect();
    got.sort();
    want.sort();
    let mut differences = Vec::new();
    let mut facts_matched = 0;
    let mut rest = got.clone();
    for w in &want {
        if let Some(p) = rest.iter().position(|g| g == w) {
            rest.remove(p);
            facts_matched += 1;
        } else {
            differences.push(format!("missing fact {w:?}"));
        }
    }
    differences.extend(rest.iter().map(|g| format!("unexpected fact {g:?}")));
    let invalidations_expected = world
        .facts
        .iter()
        .filter(|f| f.invalid_at.is_some())
        .count();
    let invalidations_matched = want
        .iter()
        .filter(|w| w.5.is_some() && got.contains(w))
        .count();
    let mut current: Vec<(String, String, String)> = got
        .iter()
        .filter(|g| !g.6)
        .map(|g| (g.0.clone(), g.2.clone(), graph::dedup::normalize_fact(&g.3)))
        .collect();
    let all_current = current.len();
    current.sort();
    current.dedup();
    let duplicate_facts = all_current - current.len();
    let mut keys: Vec<String> = stored_names
        .iter()
        .map(|n| graph::dedup::normalize_name(n))
        .collect();
    keys.sort();
    keys.dedup();
    let duplicate_entities = stored_names.len() - keys.len();
    let entities_matched = world
        .entities
        .iter()
        .filter(|e| stored_names.contains(e))
        .count();
    for n in &stored_names {
        if !world.entities.contains(n) {
            differences.push(format!("unexpected entity {n}"));
        }
    }
    Ok(Check {
        facts_matched,
        facts_stored: got.len(),
        entities_matched,
        entities_stored: stored_names.len(),
        duplicate_entities,
        duplicate_facts,
        invalidations_matched,
        invalidations_expected,
        differences,
    })
}

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let episodes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let delay_ms: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let embed_ms: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20);
    let only = args.get(3).cloned();
    let mut all_identical = true;
    for variant in VARIANTS {
        if only.as_deref().is_some_and(|o| o != variant) {
            continue;
        }
        all_identical &= bench_world(World::of(variant, episodes), delay_ms, embed_ms).await?;
    }
    println!(
        "every world: all graphs identical to the ground truth: {}",
        if all_identical { "yes" } else { "NO" }
    );
    Ok(())
}

/// Runs one world on 1 graph and on 8 graphs at once and prints its table; whether
/// every graph came out identical to the ground truth.
async fn bench_world(world: World, delay_ms: u64, embed_ms: u64) -> gralkor::Result<bool> {
    let world = Arc::new(world);
    let counts: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let chat = Arc::new(AtomicUsize::new(0));
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(FakeProvider {
            world: world.clone(),
            model_delay: Duration::from_millis(delay_ms),
            embed_delay: Duration::from_millis(embed_ms),
            counts: counts.clone(),
            chat: chat.clone(),
        })
        .mount(&server)
        .await;
    let openai = OpenAi::builder("sk-fake")
        .base_url(format!("{}/v1", server.uri()))
        .build()?;
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "creating a temporary data directory".into(),
        source: e,
    })?;
    // BENCH_CLUSTER=host:port,… ingests into a FalkorDB cluster (its seed nodes, as in
    // FALKORDB_CLUSTER_NODES) instead of an embedded server.
    let config = match std::env::var("BENCH_CLUSTER").ok() {
        Some(nodes) => {
            println!("bench_ingest: FalkorDB cluster at {nodes}");
            FalkorConfig::from_lookup(|k| (k == "FALKORDB_CLUSTER_NODES").then(|| nodes.clone()))?
        }
        None => FalkorConfig::embedded(EmbeddedConfig::new(dir.path())),
    };
    let db = FalkorDb::connect(config).await?;
    let engine = Engine::new(
        db.clone(),
        Arc::new(openai.chat("fake-chat")),
        Arc::new(openai.embedder("fake-embed", Some(DIM))?),
    );
    println!();
    println!(
        "bench_ingest, world `{}`: {} episodes a graph ({}), {} entities, {} facts ({} invalidated); \
         model answers after {delay_ms} ms, embeddings after {embed_ms} ms",
        world.name,
        world.episodes.len(),
        world
            .mix
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        world.entities.len(),
        world.facts.len(),
        world
            .facts
            .iter()
            .filter(|f| f.invalid_at.is_some())
            .count(),
    );
    println!(
        "{:<7} {:>10} {:>8} {:>8} {:>7} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8} {:>9}  calls/ep by step (extract, resolve_entities, resolve_facts, entity_details); requests/ep by schema",
        "graphs",
        "episodes/s",
        "calls/ep",
        "embed/ep",
        "p50 ms",
        "p95 ms",
        "1/2/3+ calls",
        "CPU ms/ep",
        "srv CPU",
        "rest p50",
        "db rt/ep",
        "identical"
    );
    let mut all_identical = true;
    let mut checks = Vec::new();
    let server_pid = db.embedded_server().and_then(|s| s.pid());
    let only_graphs: Option<usize> = std::env::var("BENCH_GRAPHS")
        .ok()
        .and_then(|g| g.parse().ok());
    for graphs in [1, 8] {
        if only_graphs.is_some_and(|g| g != graphs) {
            continue;
        }
        let c0 = chat.load(Ordering::Relaxed);
        let before = counts.lock().expect("counts").clone();
        let tag = format!("x{graphs}");
        let cpu0 = cpu_time();
        let server_cpu0 = server_pid.and_then(process_cpu_time);
        let start = Instant::now();
        let results = run(&engine, &world, graphs, &tag).await;
        let wall = start.elapsed();
        let cpu = cpu_time().saturating_sub(cpu0);
        let server_cpu = match (server_cpu0, server_pid.and_then(process_cpu_time)) {
            (Some(a), Some(b)) => format!(
                "{:.1}",
                b.saturating_sub(a).as_secs_f64() * 1e3 / results.len() as f64
            ),
            _ => "-".to_owned(),
        };
        // Beyond the floor: what each episode spent outside the model and embedding
        // delays.
        let mut rest: Vec<Duration> = results
            .iter()
            .map(|r| {
                let floor = Duration::from_millis(
                    delay_ms * u64::from(r.calls) + embed_ms * u64::from(r.embeds),
                );
                r.latency.saturating_sub(floor)
            })
            .collect();
        rest.sort();
        let n = results.len();
        let mut latencies: Vec<Duration> = results.iter().map(|r| r.latency).collect();
        latencies.sort();
        let reported: u32 = results.iter().map(|r| r.calls).sum();
        let chat_calls = chat.load(Ordering::Relaxed) - c0;
        assert_eq!(
            reported as usize, chat_calls,
            "usage must match what the provider saw"
        );
        let embed_calls: u32 = results.iter().map(|r| r.embeds).sum();
        let round_trips: u32 = results.iter().map(|r| r.round_trips).sum();
        let per_schema: Vec<String> = counts
            .lock()
            .expect("counts")
            .iter()
            .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k} {:.3}", v as f64 / n as f64))
            .collect();
        let by_step: Vec<String> = (0..4)
            .map(|s| {
                let total: u32 = results.iter().map(|r| r.steps[s]).sum();
                format!("{:.3}", total as f64 / n as f64)
            })
            .collect();
        let took = |k: u32| results.iter().filter(|r| r.calls == k).count();
        let more = results.iter().filter(|r| r.calls >= 3).count();
        let mut identical = true;
        for g in 0..graphs {
            let c = check(&db, &format!("bench-{tag}-{g}"), &world).await?;
            identical &= c.identical(&world);
            checks.push((format!("{graphs} graphs, graph {g}"), c));
        }
        all_identical &= identical;
        println!(
            "{:<7} {:>10.2} {:>8.3} {:>8.3} {:>7.0} {:>7.0} {:>12} {:>8.1} {:>8} {:>8.0} {:>8.2} {:>9}  {}; {}",
            graphs,
            n as f64 / wall.as_secs_f64(),
            chat_calls as f64 / n as f64,
            embed_calls as f64 / n as f64,
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            format!("{}/{}/{}", took(1), took(2), more),
            cpu.as_secs_f64() * 1e3 / n as f64,
            server_cpu,
            percentile(&rest, 0.50),
            round_trips as f64 / n as f64,
            if identical { "yes" } else { "NO" },
            by_step.join(" / "),
            per_schema.join(", "),
        );
    }
    println!("identical-graph check against the ground truth:");
    for (label, c) in &checks {
        if label.ends_with("graph 0") || !c.identical(&world) {
            println!(
                "  {label}: facts {}/{} (stored {}), entities {}/{} (stored {}), duplicates {} entities + {} facts, \
                 invalidations at the successor's valid time {}/{} — {}",
                c.facts_matched,
                world.facts.len(),
                c.facts_stored,
                c.entities_matched,
                world.entities.len(),
                c.entities_stored,
                c.duplicate_entities,
                c.duplicate_facts,
                c.invalidations_matched,
                c.invalidations_expected,
                if c.identical(&world) {
                    "identical"
                } else {
                    "DIFFERENT"
                },
            );
        }
        for d in c.differences.iter().take(5) {
            println!("    {d}");
        }
    }
    db.shutdown().await?;
    Ok(all_identical)
}
