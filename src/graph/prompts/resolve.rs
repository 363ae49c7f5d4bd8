//! The prompts of the batched follow-up calls of one episode: entity resolution, fact
//! resolution, and entity details (summaries and ontology attributes).
//!
//! Each call covers every item of the episode that needs it, so the number of calls
//! never grows with the number of entities or facts. Items and candidates are numbered
//! and the model answers with those numbers; the engine ignores any number that was not
//! offered for that item.

use super::tagged;

/// System prompt of the entity-resolution call.
pub(crate) const ENTITIES_SYSTEM: &str = "\
You decide whether names just extracted from an episode refer to entities already \
stored in a knowledge graph.

For every item you get the new name, its type, and numbered candidates (stored \
entities with their names, types and summaries). Answer for every item:
- `duplicate_of`: the number of the candidate that is the same real-world entity, or -1 \
when none is.
- Two names are the same entity only when they clearly refer to the same person, \
organisation, place or thing: a nickname, an abbreviation, a fuller or shorter form of \
the same name, a different spelling. Similar but different things (two people sharing \
a first name with nothing else in common, a company and its product, a city and its \
country) are not the same entity.
- When unsure, answer -1: a missing merge can be repaired later, a wrong merge corrupts \
both entities.
";

/// System prompt of the fact-resolution call.
pub(crate) const FACTS_SYSTEM: &str = "\
You compare facts just extracted from an episode with facts already stored in a \
knowledge graph.

For every new fact you get numbered existing facts about the same entities, each with \
the time span during which it was true (`valid_at` to `invalid_at`; null means unknown \
or still true). Answer for every new fact:
- `duplicate_of`: the number of an existing fact that states the same thing (same \
relation, same meaning, compatible times; wording may differ), or -1. Only facts listed \
as `same entities` can be duplicates.
- `contradicts`: the numbers of existing facts that cannot be true at the same time as \
the new fact (Alice works at Globex vs Alice works at Acme when she can hold only one \
job; a new status, location or value replacing an old one). Facts that can hold \
together, add detail, or concern other entities are not contradictions. A plan or \
intention does not contradict the current state. Empty list when none.
";

/// System prompt of the entity-details call.
pub(crate) const DETAILS_SYSTEM: &str = "\
You maintain short descriptions and typed attributes of entities in a knowledge graph.

For each numbered entity you get its name, type, current summary and the facts learned \
about it from the latest episode.
- When a summary is requested, write a summary of at most the requested number of \
characters that keeps the most important, durable information from the current summary \
and the new facts: who or what the entity is, its relations, its current state. Drop \
repetition. Keep attribution and uncertainty (\"Bob said…\", \"maybe…\"). Never invent.
- When attributes are requested for a type, fill each field only from what the facts \
and summary state; use null for an optional field that is not stated.
";

/// Renders one numbered item with its numbered options for a user prompt.
pub(crate) fn item(out: &mut String, tag: &str, header: &str, options: &[String]) {
    let mut body = String::from(header);
    for o in options {
        body.push('\n');
        body.push_str(o);
    }
    tagged(out, tag, &body);
}
