#!/usr/bin/env python3
"""Writes synthetic.json: the project's own license-clean retrieval set, in the
LongMemEval format (one entry per question; questions of a conversation share its
haystack, which the loader ingests once). Run from this directory:
    python3 make_synthetic.py
The output is deterministic (no randomness, sorted keys)."""
import json

def s(*pairs):
    return [{"role": r, "content": c} for r, c in pairs]

U, A = "user", "assistant"

CONVERSATIONS = [
    {
        "sessions": [
            ("a1", "2024/01/08 (Mon) 18:20", s(
                (U, "We adopted a beagle puppy this weekend! His name is Biscuit and he chews everything."),
                (A, "Congratulations on Biscuit! Chew toys and a crate help a lot with beagle puppies."),
                (U, "Good idea, I'll get a crate tomorrow."))),
            ("a2", "2024/01/21 (Sun) 10:05", s(
                (U, "Can you suggest a slow-cooker recipe with lentils? Something for a cold Sunday."),
                (A, "Try a red lentil and sweet potato stew with cumin, smoked paprika and coconut milk."),
                (U, "Perfect, I have all of that except the coconut milk."))),
            ("a3", "2024/02/14 (Wed) 20:40", s(
                (U, "I started Portuguese lessons yesterday. My tutor is called Marta and we meet on Tuesdays."),
                (A, "Boa sorte! Weekly lessons plus a little daily practice work well."))),
            ("a4", "2024/03/03 (Sun) 09:15", s(
                (U, "Last weekend I finally moved from Leeds to Bristol. The new flat is near the harbour."),
                (A, "Welcome to Bristol! The harbourside is lovely for walks with a dog."))),
            ("a5", "2024/04/20 (Sat) 16:00", s(
                (U, "Biscuit had his check-up with Dr. Okafor, our new vet in Bristol. He's healthy."),
                (A, "Great news. Beagles love food, so keep an eye on his weight."),
                (U, "Also, Marta moved my Portuguese lessons to Thursdays."))),
            ("a6", "2024/05/30 (Thu) 21:30", s(
                (U, "I booked flights to Lisbon for July 12 to practise my Portuguese."),
                (A, "Lovely. Try ordering at a tasca: it's great practice."))),
        ],
        "questions": [
            ("c1-q1", "single-session-user", "What breed is my dog?", "beagle", [], "contains", ["a1"], []),
            ("c1-q2", "single-session-user", "What is the name of my Portuguese tutor?", "Marta", [], "exact", ["a3"], []),
            ("c1-q3", "knowledge-update", "On which day of the week are my Portuguese lessons now?", "Thursday", ["Thursdays"], "contains", ["a3", "a5"], []),
            ("c1-q4", "multi-session", "What is the name of the vet who looks after the puppy I adopted in January?", "Dr. Okafor", ["Okafor"], "contains", ["a1", "a5"], []),
            ("c1-q5", "temporal-reasoning", "On what date did I mention booking flights to Lisbon?", "2024-05-30", ["May 30, 2024"], "contains", ["a6"], []),
            ("c1-q6_abs", "single-session-user", "What is the name of my cat?", "You never mentioned a cat; you mentioned a beagle named Biscuit.", [], "abstention", [], ["cat", "kitten"]),
            ("c1-q7", "single-session-user", "Which city did I move away from?", "Leeds", [], "exact", ["a4"], []),
        ],
    },
    {
        "sessions": [
            ("b1", "2024/06/02 (Sun) 11:00", s(
                (U, "I just joined Northwind Logistics as a data engineer. My manager is Priyanka Rao."),
                (A, "Congratulations on the new role at Northwind!"))),
            ("b2", "2024/06/09 (Sun) 15:45", s(
                (U, "What are good stretches for a stiff neck after long days at the desk?"),
                (A, "Chin tucks, slow neck rotations and doorway chest stretches, a few times a day."))),
            ("b3", "2024/07/15 (Mon) 19:10", s(
                (U, "Our team is migrating the warehouse pipelines from Airflow to Dagster this quarter."),
                (A, "Dagster's software-defined assets make lineage much clearer."))),
            ("b4", "2024/08/30 (Fri) 22:00", s(
                (U, "I ran my first half marathon in Utrecht today, 1 hour 58 minutes!"),
                (A, "Under two hours on your first half marathon is excellent."))),
            ("b5", "2024/10/01 (Tue) 08:30", s(
                (U, "Priyanka left Northwind, so Tom Beck is my manager now."),
                (A, "Changes in management can be unsettling; a quick intro meeting helps."))),
            ("b6", "2024/11/11 (Mon) 18:00", s(
                (U, "I'm allergic to shellfish, so please never suggest recipes with prawns."),
                (A, "Noted: no shellfish in any recipe suggestions."))),
        ],
        "questions": [
            ("c2-q1", "knowledge-update", "Who is my manager at work now?", "Tom Beck", [], "contains", ["b1", "b5"], []),
            ("c2-q2", "single-session-user", "Which orchestration tool is my team migrating to?", "Dagster", [], "exact", ["b3"], []),
            ("c2-q3", "single-session-user", "What was my half marathon time?", "1 hour 58 minutes", ["1:58"], "contains", ["b4"], []),
            ("c2-q4", "temporal-reasoning", "On what date did I run my first half marathon?", "2024-08-30", ["August 30, 2024"], "contains", ["b4"], []),
            ("c2-q5", "single-session-user", "What food am I allergic to?", "shellfish", [], "contains", ["b6"], []),
            ("c2-q6_abs", "single-session-user", "What did I name my goldfish?", "You never mentioned a goldfish.", [], "abstention", [], ["goldfish"]),
            ("c2-q7", "multi-session", "Which company did I join, and who manages me there now?", "Northwind Logistics", ["Tom Beck"], "contains", ["b1", "b5"], []),
        ],
    },
    {
        "sessions": [
            ("d1", "2025/01/05 (Sun) 12:00", s(
                (U, "My sister Ines is getting married in Porto on June 14."),
                (A, "How exciting! Are you part of the wedding party?"),
                (U, "Yes, I'm the maid of honour."))),
            ("d2", "2025/01/19 (Sun) 17:30", s(
                (U, "I'm thinking about buying a road bike. Is aluminium fine for a beginner?"),
                (A, "Yes: an aluminium frame with a carbon fork is a great value start."))),
            ("d3", "2025/02/22 (Sat) 09:00", s(
                (U, "I bought a Canyon Endurace road bike, blue. First ride along the river was great."),
                (A, "Nice choice! Remember to check the tyre pressure before rides."))),
            ("d4", "2025/03/30 (Sun) 14:20", s(
                (U, "Ines moved the wedding to September 20 because the venue flooded."),
                (A, "Sorry about the venue. September in Porto should be beautiful."))),
            ("d5", "2025/04/12 (Sat) 20:00", s(
                (U, "Recommend a sci-fi novel? I loved The Left Hand of Darkness."),
                (A, "Try The Dispossessed, also by Ursula K. Le Guin."))),
        ],
        "questions": [
            ("c3-q1", "knowledge-update", "When is my sister's wedding?", "September 20", ["20 September"], "contains", ["d1", "d4"], []),
            ("c3-q2", "single-session-user", "What brand of road bike did I buy?", "Canyon", [], "exact", ["d3"], []),
            ("c3-q3", "multi-session", "In which city will the wedding of my sister be held?", "Porto", [], "contains", ["d1", "d4"], []),
            ("c3-q4", "single-session-user", "What is my role at my sister's wedding?", "maid of honour", ["maid of honor"], "contains", ["d1"], []),
            ("c3-q5_abs", "single-session-user", "What is the name of my brother?", "You never mentioned a brother; you mentioned your sister Ines.", [], "abstention", [], ["brother"]),
            ("c3-q6", "temporal-reasoning", "On what date did I say the wedding was moved?", "2025-03-30", ["March 30, 2025"], "contains", ["d4"], []),
        ],
    },
]

def main():
    out = []
    for c in CONVERSATIONS:
        ids = [x[0] for x in c["sessions"]]
        dates = [x[1] for x in c["sessions"]]
        sessions = [x[2] for x in c["sessions"]]
        last = dates[-1]
        for (qid, kind, q, a, alts, scoring, ev, absent) in c["questions"]:
            entry = {
                "question_id": qid, "question_type": kind, "question": q, "answer": a,
                "question_date": last, "haystack_session_ids": ids, "haystack_dates": dates,
                "haystack_sessions": sessions, "answer_session_ids": ev, "scoring": scoring,
            }
            if alts:
                entry["answer_alternatives"] = alts
            if absent:
                entry["absent"] = absent
            out.append(entry)
    with open("synthetic.json", "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")

main()
