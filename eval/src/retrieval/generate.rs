//! A generated, seeded retrieval set in the LoCoMo format that looks like real memory:
//! two speakers chatting over 20–40 long sessions (about 20 turns each), the same
//! friends and family and the same topics coming back session after session, and
//! each question's answer stated in one session (two for a multi-hop question) while
//! other sessions talk about the same person and the same topic without it.
//!
//! * **Sessions.** Each session picks two or three of the conversation's topics and
//!   alternates the two speakers for [`TURNS_PER_SESSION`] lines; each line is one or
//!   two chatty sentences about a topic, naming one of the conversation's recurring
//!   people, places and things.
//! * **Evidence.** A planted fact (`Lena named her puppy Biscuit`) goes into one
//!   session at a random turn; [`DISTRACTORS_PER_FACT`] other sessions get a line about
//!   the same person and the same subject without the answer (`Lena's puppy chewed
//!   the sofa`). A multi-hop question asks for two facts of one kind planted in two
//!   sessions (its evidence is both). Questions are worded as a person asks them, not
//!   as the line says it (`What did Lena call her dog?` for `named her puppy`) half
//!   of the time.
//! * **Abstention** questions ask about a subject never planted for that person;
//!   their `absent` words are the answers the other facts of that kind use.
//!
//! The generator knows nothing about any retrieval method: its templates are fixed,
//! every choice comes from the seed (a SplitMix64 stream), and the same seed gives the
//! same file byte for byte.
//!
//! ```
//! use gralkor_eval::retrieval::generate::{GenerateOptions, generate};
//!
//! let set = generate(&GenerateOptions { conversations: 1, seed: 7, ..GenerateOptions::default() });
//! assert_eq!(set.as_array().unwrap().len(), 1);
//! assert_eq!(set, generate(&GenerateOptions { conversations: 1, seed: 7, ..GenerateOptions::default() }));
//! ```

use serde_json::{Value, json};

/// Lines (alternating speakers) per session.
pub const TURNS_PER_SESSION: usize = 20;
/// Sessions that mention a planted fact's person and subject without its answer.
pub const DISTRACTORS_PER_FACT: usize = 3;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateOptions {
    /// Conversations (samples).
    pub conversations: usize,
    /// Fewest sessions per conversation.
    pub min_sessions: usize,
    /// Most sessions per conversation.
    pub max_sessions: usize,
    /// Questions with evidence per conversation (single- and multi-hop), besides
    /// one abstention per conversation.
    pub questions: usize,
    /// The seed.
    pub seed: u64,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            conversations: 4,
            min_sessions: 20,
            max_sessions: 40,
            questions: 24,
            seed: 28,
        }
    }
}

/// SplitMix64: small, seeded, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

const SPEAKERS: [(&str, &str); 8] = [
    ("Maya", "Jonas"),
    ("Priya", "Daniel"),
    ("Sofia", "Marcus"),
    ("Hannah", "Kenji"),
    ("Amara", "Lukas"),
    ("Elena", "Omar"),
    ("Grace", "Mateo"),
    ("Nadia", "Felix"),
];

/// The recurring people: (name, how the human refers to them).
const PEOPLE: [(&str, &str); 12] = [
    ("Lena", "my sister"),
    ("Raj", "my coworker"),
    ("Ines", "my neighbour"),
    ("Tomas", "my old friend"),
    ("Carla", "my boss"),
    ("Ben", "my cousin"),
    ("Yusuf", "my running buddy"),
    ("Clara", "my aunt"),
    ("Theo", "my brother"),
    ("Mira", "my best friend"),
    ("Sam", "my roommate"),
    ("Olga", "my landlady"),
];

const PLACES: [&str; 12] = [
    "the farmers market",
    "the community centre",
    "the lake",
    "the old library",
    "the climbing gym",
    "the train station",
    "the harbour",
    "the botanical garden",
    "the office",
    "the park by the river",
    "the bakery on the corner",
    "the museum",
];

const TOPICS: [&str; 10] = [
    "work", "cooking", "pets", "travel", "music", "fitness", "garden", "books", "family", "home",
];

/// Filler lines per topic (`{p}` a person's name, `{r}` their relation, `{place}`).
fn filler(topic: &str) -> &'static [&'static str] {
    match topic {
        "work" => &[
            "Work has been hectic again, {p} and I spent the whole afternoon going through the quarterly numbers and nobody could agree on anything.",
            "I had a long meeting with {p} about the new project timeline, it keeps slipping and I am starting to worry about the deadline.",
            "{p} brought donuts to the office today, which was nice because the team has been stressed about the product launch.",
            "I think I need to ask for more help at work, {r} {p} says I take on too much and should say no more often.",
            "The office moved everyone to new desks this week and I ended up next to {p}, which honestly is fine.",
            "We had our team lunch near {place} and {p} told the funniest story about a client call that went wrong.",
        ],
        "cooking" => &[
            "I tried a new recipe last night, a slow cooked stew, and {p} came over to taste it and asked for seconds.",
            "Cooking has become my way to relax, I spent Sunday making bread and soup while {p} kept me company.",
            "{p} gave me some fresh herbs from {place} and I used them in a pasta sauce that turned out great.",
            "I burned the rice again, {r} {p} laughed and said I should stop scrolling on my phone while cooking.",
            "We are planning a potluck dinner and {p} wants everyone to bring something they cooked themselves.",
            "I have been baking a lot lately, cookies, muffins, a lemon cake, and {p} keeps volunteering as the taster.",
        ],
        "pets" => &[
            "{p} brought the dog to {place} and it ran straight into the water, everyone was soaked and laughing.",
            "Pets are so much work but so worth it, {r} {p} was up all night because the puppy would not settle.",
            "I went with {p} to the vet for a checkup and the waiting room was full of nervous cats and dogs.",
            "{p} is thinking about getting another animal, maybe a cat this time, since the dog seems lonely.",
            "The neighbours' cat keeps sneaking into our garden and {p} thinks we should just adopt it.",
            "I walked the dog with {p} this morning and we met so many other dog owners near {place}.",
        ],
        "travel" => &[
            "Travel plans are getting complicated, {p} wants to go somewhere warm but I would rather see mountains.",
            "{r} {p} just got back from a trip and showed me hundreds of photos of old streets and markets.",
            "I spent the evening looking at flights with {p}, prices are crazy right now for the summer.",
            "We took the train from {place} for a weekend away and {p} fell asleep before we even left the city.",
            "{p} keeps a travel journal and read me a few pages about getting lost in a foreign city.",
            "Packing is my least favourite part of any trip, {p} always finishes in ten minutes and I take two days.",
        ],
        "music" => &[
            "I went to a concert with {p} last weekend, the band was loud and the crowd sang along to every song.",
            "Music practice is going slowly, {r} {p} says I should play every day even if only for ten minutes.",
            "{p} made me a playlist for running and it is full of old songs I had completely forgotten about.",
            "There was a jazz night at {place} and {p} convinced me to stay until the very last set.",
            "I have been learning a new song on the guitar and {p} is patient enough to listen to my mistakes.",
            "{p} wants to start a small band with friends from work, just for fun on Friday evenings.",
        ],
        "fitness" => &[
            "I went for a long run with {p} this morning, we did the loop around {place} twice.",
            "My knee has been sore since the last race, {r} {p} told me to rest for a week before training again.",
            "{p} signed us both up for a yoga class and I was the least flexible person in the room.",
            "I am trying to get back into shape, {p} and I go to the gym three times a week now.",
            "We did a long bike ride on Saturday and {p} had a flat tyre halfway, so we walked the last part.",
            "{p} is training for a half marathon and keeps sending me screenshots of their pace.",
        ],
        "garden" => &[
            "The garden is finally growing, tomatoes and beans everywhere, and {p} helped me build a new fence.",
            "{r} {p} gave me seedlings and I planted them along the wall where the sun is strongest.",
            "Slugs ate half of my lettuce this week, {p} says beer traps work but I have my doubts.",
            "I spent the whole weekend weeding while {p} read in the hammock and gave advice.",
            "We went to {place} with {p} to buy seeds and came back with far too many plants.",
            "{p} wants to start composting and has been reading everything about it online.",
        ],
        "books" => &[
            "I just finished a mystery novel that {p} lent me, the ending completely surprised me.",
            "Our book club met at {place} and {p} argued for an hour about whether the main character was likeable.",
            "{r} {p} recommended a history book and I am enjoying it more than I expected.",
            "Reading before bed has become a habit, {p} says it helps with sleep and I agree.",
            "{p} gave me a box of old books from the attic and some of them are older than both of us.",
            "I have started three books this month and finished none, {p} thinks that is hilarious.",
        ],
        "family" => &[
            "Family dinner was chaotic as always, {p} told stories about when we were kids and everyone laughed.",
            "{r} {p} called me today, we talked for two hours about everything and nothing.",
            "We are planning a family reunion for the summer and {p} volunteered to organise the food.",
            "{p} has been going through a hard time lately so I try to check in every few days.",
            "I visited {p} on Sunday and we looked through old photo albums together.",
            "The whole family met at {place} for a birthday and {p} gave a surprisingly moving speech.",
        ],
        _ => &[
            "The house is a mess because we started painting the living room and {p} picked the colour.",
            "The heating broke again and {r} {p} came over with tools to help me fix it.",
            "I finally cleaned out the garage, {p} took a whole car load of stuff to donate.",
            "We rearranged the furniture and {p} thinks the room feels twice as big now.",
            "{p} found a great lamp at {place} and gave it to me as a housewarming gift.",
            "The landlord is fixing the roof next week so {p} offered to let me stay over if it gets noisy.",
        ],
    }
}

/// Short replies and reactions the other speaker gives.
const REPLIES: [&str; 12] = [
    "That sounds like quite a week, how are you feeling about it all?",
    "Ha, that is so typical, I can totally picture it.",
    "Oh wow, I did not expect that at all, tell me more.",
    "That is lovely to hear, it sounds like you needed a good day.",
    "I know what you mean, it has been the same for me lately.",
    "Honestly that would drive me crazy, you are very patient.",
    "Good for you, it is nice when things finally work out.",
    "That reminds me of something similar that happened last year.",
    "I hope it gets easier soon, let me know if I can help.",
    "Sounds fun, we should do something like that together sometime.",
    "Really? I always thought it was the other way around.",
    "Take it easy, you deserve a break after all that.",
];

/// A kind of planted fact: its subject, how it is said
/// (`{p}` the person, `{r}` their relation, `{v}` the answer), how it is asked (two
/// wordings: close to the line, and paraphrased), a distractor line (the same
/// person and subject, no answer), and the answers it draws from.
struct FactKind {
    said: &'static str,
    asked: [&'static str; 2],
    distractor: &'static str,
    values: &'static [&'static str],
}

const FACTS: [FactKind; 12] = [
    FactKind {
        said: "Oh and guess what, {r} {p} finally named the new puppy, it is called {v} and it already owns the sofa.",
        asked: [
            "What is the name of {p}'s new puppy?",
            "What did {p} call the dog?",
        ],
        distractor: "{p}'s new puppy chewed through a charging cable again, it is adorable but a menace.",
        values: &[
            "Biscuit", "Pepper", "Mochi", "Juniper", "Waffles", "Ziggy", "Nutmeg", "Pickles",
        ],
    },
    FactKind {
        said: "{r} {p} booked the summer trip yesterday, they are flying to {v} for two weeks in July.",
        asked: [
            "Where is {p} flying for the summer trip?",
            "Which city is {p} visiting in July?",
        ],
        distractor: "{p} keeps changing their mind about the summer trip, every day there is a new plan.",
        values: &[
            "Lisbon",
            "Reykjavik",
            "Hanoi",
            "Marrakesh",
            "Vancouver",
            "Tbilisi",
            "Cartagena",
            "Ljubljana",
        ],
    },
    FactKind {
        said: "Big news at work, {p} got promoted and is now the new {v}, we celebrated with cake.",
        asked: [
            "What was {p} promoted to at work?",
            "What is {p}'s new job title?",
        ],
        distractor: "{p} has been hoping for a promotion for ages, the review is supposed to be next month.",
        values: &[
            "head of logistics",
            "design director",
            "lead data analyst",
            "operations manager",
            "chief of staff",
            "regional sales lead",
        ],
    },
    FactKind {
        said: "{r} {p} won the neighbourhood cooking contest with a {v}, the judges went back for more.",
        asked: [
            "What dish did {p} win the cooking contest with?",
            "Which recipe took first prize for {p}?",
        ],
        distractor: "{p} is nervous about the neighbourhood cooking contest and keeps practising new dishes.",
        values: &[
            "pumpkin risotto",
            "lamb tagine",
            "mushroom pie",
            "coconut curry",
            "plum crumble",
            "beetroot soup",
        ],
    },
    FactKind {
        said: "{p} started taking lessons, {r} {p} is learning to play the {v} and practises every night.",
        asked: [
            "What instrument is {p} learning to play?",
            "Which instrument did {p} take up?",
        ],
        distractor: "{p} says music lessons are harder than expected and the neighbours are not thrilled.",
        values: &[
            "cello",
            "trumpet",
            "banjo",
            "harp",
            "saxophone",
            "accordion",
            "ukulele",
        ],
    },
    FactKind {
        said: "The book club finally picked the next novel, {p} chose {v} and everyone has to finish it by next month.",
        asked: [
            "Which novel did {p} choose for the book club?",
            "What book are they reading next because of {p}?",
        ],
        distractor: "{p} could not decide what the book club should read next, the list keeps growing.",
        values: &[
            "The Silent Orchard",
            "Harbour of Glass",
            "The Last Cartographer",
            "Winter Lanterns",
            "A House of Copper",
            "The Salt Road",
        ],
    },
    FactKind {
        said: "{r} {p} ran the city half marathon on Sunday and finished in {v}, a personal best.",
        asked: [
            "What was {p}'s time in the half marathon?",
            "How fast did {p} finish the race?",
        ],
        distractor: "{p} is worried about the half marathon, the training plan fell apart after the cold.",
        values: &[
            "1 hour 42 minutes",
            "1 hour 55 minutes",
            "2 hours 3 minutes",
            "1 hour 38 minutes",
            "1 hour 49 minutes",
        ],
    },
    FactKind {
        said: "{p} planted a {v} tree in the back garden, {r} {p} says it will take years to fruit.",
        asked: [
            "What kind of tree did {p} plant in the back garden?",
            "Which fruit tree is growing at {p}'s place?",
        ],
        distractor: "{p} keeps talking about planting a tree in the back garden but never gets around to it.",
        values: &["fig", "cherry", "quince", "apricot", "walnut", "persimmon"],
    },
    FactKind {
        said: "{r} {p} is moving, they signed a lease on a flat in {v} and move in next month.",
        asked: [
            "Which neighbourhood is {p} moving to?",
            "Where did {p} sign the lease for the new flat?",
        ],
        distractor: "{p} has been flat hunting for months, every viewing seems to go wrong somehow.",
        values: &[
            "Northgate",
            "Elm Hill",
            "Riverside Heights",
            "Old Quarry",
            "Kingsbridge",
            "Willow Park",
        ],
    },
    FactKind {
        said: "{p} bought a car at last, {r} {p} went for a {v} because it was the only one with a big boot.",
        asked: [
            "What car did {p} buy?",
            "Which vehicle did {p} end up getting?",
        ],
        distractor: "{p} test drove a few cars this week and hated the salesmen at every dealership.",
        values: &[
            "green Volvo estate",
            "red Skoda Octavia",
            "silver Toyota Prius",
            "blue Subaru Outback",
            "white Fiat Doblo",
        ],
    },
    FactKind {
        said: "{p} got us tickets for the {v} concert, {r} {p} queued online for two hours.",
        asked: [
            "Which band's concert did {p} get tickets for?",
            "Who are they going to see live thanks to {p}?",
        ],
        distractor: "{p} tried to buy concert tickets but the website crashed and everything sold out.",
        values: &[
            "Velvet Harbour",
            "The Paper Kites",
            "Northern Static",
            "Lunar Choir",
            "Brass Lantern",
        ],
    },
    FactKind {
        said: "{p} changed jobs, {r} {p} now works at {v} and loves the short commute.",
        asked: [
            "Which company does {p} work at now?",
            "Where did {p} take the new job?",
        ],
        distractor: "{p} is unhappy at work and keeps scrolling through job listings during lunch.",
        values: &[
            "Brightwell Labs",
            "Oakridge Insurance",
            "Tidewater Foods",
            "Kestrel Robotics",
            "Marlow & Finch",
        ],
    },
];

fn fill(template: &str, person: (&str, &str), place: &str, value: &str) -> String {
    let s = template
        .replace("{p}", person.0)
        .replace("{r}", person.1)
        .replace("{place}", place)
        .replace("{v}", value);
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => s,
    }
}

fn date(n: usize) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    // About one session every eleven days from 3 January 2023.
    let day = 2 + n * 11;
    let (month, day) = (day / 28, day % 28 + 1);
    let year = 2023 + month / 12;
    format!(
        "{}:{:02} pm on {} {}, {}",
        1 + n % 9,
        (n * 7) % 60,
        day,
        MONTHS[month % 12],
        year
    )
}

/// A planted fact: its kind, person, answer and the session it is in.
struct Planted {
    kind: usize,
    value: &'static str,
    session: usize,
}

/// One conversation as a LoCoMo sample.
fn conversation(rng: &mut Rng, index: usize, options: &GenerateOptions) -> Value {
    let (human, agent) = SPEAKERS[index % SPEAKERS.len()];
    let span = options.max_sessions.saturating_sub(options.min_sessions) + 1;
    let sessions = options.min_sessions.max(1) + rng.below(span);
    // Six recurring people and six places per conversation.
    let mut people: Vec<usize> = (0..PEOPLE.len()).collect();
    rng.shuffle(&mut people);
    people.truncate(6);
    let mut places: Vec<usize> = (0..PLACES.len()).collect();
    rng.shuffle(&mut places);
    places.truncate(6);
    // The sessions' topics.
    let topics: Vec<Vec<&str>> = (0..sessions)
        .map(|_| {
            let mut t: Vec<&str> = TOPICS.to_vec();
            rng.shuffle(&mut t);
            t.truncate(2 + rng.below(2));
            t
        })
        .collect();
    // Lines per session: filler first, planted lines replace some of it.
    let mut lines: Vec<Vec<(usize, String)>> = (0..sessions)
        .map(|s| {
            (0..TURNS_PER_SESSION)
                .map(|t| {
                    let speaker = t % 2;
                    let person = PEOPLE[*rng.pick(&people)];
                    let place = PLACES[*rng.pick(&places)];
                    let text = if speaker == 1 && rng.chance(50) {
                        rng.pick(&REPLIES).to_string()
                    } else {
                        let topic: &str = topics[s][rng.below(topics[s].len())];
                        let options = filler(topic);
                        fill(options[rng.below(options.len())], person, place, "")
                    };
                    (speaker, text)
                })
                .collect()
        })
        .collect();
    // Facts: each (kind, person) at most once, answers distinct per kind.
    let mut planted: Vec<Planted> = Vec::new();
    let mut questions: Vec<Value> = Vec::new();
    let mut used_values: Vec<&str> = Vec::new();
    let mut used_pairs: Vec<(usize, usize)> = Vec::new();
    // Lines holding a planted fact: no later line overwrites them.
    let mut fixed: Vec<(usize, usize)> = Vec::new();
    let mut plant = |rng: &mut Rng,
                     lines: &mut Vec<Vec<(usize, String)>>,
                     kind: usize,
                     person: usize,
                     avoid: Option<usize>|
     -> Option<Planted> {
        let k = &FACTS[kind];
        let value = *k
            .values
            .iter()
            .cycle()
            .skip(rng.below(k.values.len()))
            .take(k.values.len())
            .find(|v| !used_values.contains(v))?;
        used_values.push(value);
        let mut session = rng.below(sessions);
        if Some(session) == avoid {
            session = (session + 1 + rng.below(sessions - 1)) % sessions;
        }
        let mut turn = 2 + 2 * rng.below(TURNS_PER_SESSION / 2 - 2);
        while fixed.contains(&(session, turn)) {
            turn = (turn + 2) % TURNS_PER_SESSION;
        }
        fixed.push((session, turn));
        let place = PLACES[places[0]];
        lines[session][turn] = (0, fill(k.said, PEOPLE[person], place, value));
        // Distractors: the same person and subject in other sessions, no answer.
        for _ in 0..DISTRACTORS_PER_FACT {
            let s = rng.below(sessions);
            let t = 2 * rng.below(TURNS_PER_SESSION / 2);
            if s != session && Some(s) != avoid && !fixed.contains(&(s, t)) {
                lines[s][t] = (0, fill(k.distractor, PEOPLE[person], place, ""));
            }
        }
        Some(Planted {
            kind,
            value,
            session,
        })
    };
    let dia = |session: usize, lines: &Vec<Vec<(usize, String)>>, text: &str| {
        let turn = lines[session].iter().position(|(_, t)| t.contains(text));
        format!("D{}:{}", session + 1, turn.map_or(1, |t| t + 1))
    };
    let mut attempts = 0;
    while questions.len() < options.questions && attempts < options.questions * 20 {
        attempts += 1;
        let kind = rng.below(FACTS.len());
        let person = *rng.pick(&people);
        if used_pairs.contains(&(kind, person)) {
            continue;
        }
        let multi = rng.chance(25);
        let paraphrased = rng.chance(50);
        let Some(first) = plant(rng, &mut lines, kind, person, None) else {
            continue;
        };
        used_pairs.push((kind, person));
        let k = &FACTS[kind];
        let who = PEOPLE[person];
        if multi {
            // The same kind for a second person, asked together.
            let Some(&other) = people
                .iter()
                .find(|p| **p != person && !used_pairs.contains(&(kind, **p)))
            else {
                continue;
            };
            let Some(second) = plant(rng, &mut lines, kind, other, Some(first.session)) else {
                continue;
            };
            used_pairs.push((kind, other));
            let q1 = fill(k.asked[usize::from(paraphrased)], who, "", "");
            let q2 = fill(k.asked[usize::from(paraphrased)], PEOPLE[other], "", "");
            let q = format!(
                "{} And {}",
                q1,
                q2.chars()
                    .next()
                    .map_or(String::new(), |c| c.to_lowercase().collect::<String>()
                        + &q2[c.len_utf8()..])
            );
            questions.push(json!({
                "question": q,
                "answer": first.value,
                "evidence": [
                    dia(first.session, &lines, first.value),
                    dia(second.session, &lines, second.value),
                ],
                "category": 1,
            }));
            planted.push(first);
            planted.push(second);
        } else {
            questions.push(json!({
                "question": fill(k.asked[usize::from(paraphrased)], who, "", ""),
                "answer": first.value,
                "evidence": [dia(first.session, &lines, first.value)],
                "category": 4,
            }));
            planted.push(first);
        }
    }
    // One abstention: a kind never planted for a person who is in the conversation.
    if let Some((kind, person)) = (0..FACTS.len())
        .flat_map(|k| people.iter().map(move |p| (k, *p)))
        .find(|pair| !used_pairs.contains(pair))
    {
        let k = &FACTS[kind];
        questions.push(json!({
            "question": fill(k.asked[0], PEOPLE[person], "", ""),
            "adversarial_answer": k.values[0],
            "evidence": [],
            "category": 5,
            "absent": planted
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| p.value)
                .chain(k.values.iter().copied().filter(|v| !used_values.contains(v)))
                .collect::<Vec<_>>(),
        }));
    }
    let mut conv = serde_json::Map::new();
    conv.insert("speaker_a".into(), json!(human));
    conv.insert("speaker_b".into(), json!(agent));
    for (s, session) in lines.iter().enumerate() {
        conv.insert(format!("session_{}_date_time", s + 1), json!(date(s)));
        let turns: Vec<Value> = session
            .iter()
            .enumerate()
            .map(|(t, (speaker, text))| {
                json!({
                    "speaker": if *speaker == 0 { human } else { agent },
                    "dia_id": format!("D{}:{}", s + 1, t + 1),
                    "text": text,
                })
            })
            .collect();
        conv.insert(format!("session_{}", s + 1), Value::Array(turns));
    }
    json!({
        "sample_id": format!("gen-{}-{}", options.seed, index + 1),
        "conversation": conv,
        "qa": questions,
    })
}

/// The set (see the [module](self) documentation) as LoCoMo JSON.
pub fn generate(options: &GenerateOptions) -> Value {
    let mut rng = Rng(options.seed);
    Value::Array(
        (0..options.conversations)
            .map(|i| conversation(&mut rng, i, options))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::dataset::{Scoring, load};

    #[test]
    fn the_generated_set_has_long_sessions_recurring_names_and_evidence_in_one_or_two() {
        let options = GenerateOptions {
            conversations: 2,
            ..GenerateOptions::default()
        };
        let value = generate(&options);
        assert_eq!(value, generate(&options), "the same seed, the same set");
        assert_ne!(
            value,
            generate(&GenerateOptions {
                seed: 29,
                ..options.clone()
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("gen.json");
        std::fs::write(&file, value.to_string()).unwrap();
        let d = load(&file, None).unwrap();
        assert_eq!(d.conversations.len(), 2);
        for c in &d.conversations {
            assert!(
                (20..=40).contains(&c.sessions.len()),
                "{}",
                c.sessions.len()
            );
            assert!(
                c.sessions
                    .iter()
                    .all(|s| s.turns.len() == TURNS_PER_SESSION / 2)
            );
            let evidence: Vec<_> = c
                .questions
                .iter()
                .filter(|q| !q.evidence.is_empty())
                .collect();
            assert_eq!(evidence.len(), options.questions);
            assert!(evidence.iter().all(|q| (1..=2).contains(&q.evidence.len())));
            assert!(evidence.iter().any(|q| q.evidence.len() == 2));
            let abstentions: Vec<_> = c
                .questions
                .iter()
                .filter(|q| q.scoring == Scoring::Abstention)
                .collect();
            assert_eq!(abstentions.len(), 1);
            assert!(!abstentions[0].absent.is_empty());
            // Each answer is said in its evidence session, and the person it is about
            // recurs in other sessions too.
            for q in &evidence {
                let text = |id: &str| {
                    let s = c.sessions.iter().find(|s| s.id == id).unwrap();
                    s.turns
                        .iter()
                        .flat_map(|t| t.messages())
                        .map(|m| m.content.clone())
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                assert!(text(&q.evidence[0]).contains(&q.answers[0]), "{}", q.id);
                let name = PEOPLE
                    .iter()
                    .map(|p| p.0)
                    .find(|n| q.question.contains(n))
                    .unwrap();
                let mentions = c
                    .sessions
                    .iter()
                    .filter(|s| text(&s.id).contains(name))
                    .count();
                assert!(mentions >= 5, "{name} in {mentions} sessions");
            }
        }
    }
}
