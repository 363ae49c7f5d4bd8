//! `gralkor dump` and `gralkor restore` end to end (test-trees/dump.md): a graph with
//! an invalidated fact and an episode, dumped, restored into another data directory
//! and dumped again — the same bytes; restores the binary refuses.

mod common;

use common::{Home, write_graph};

/// `gralkor dump -o PATH` in `home`, returning the file's bytes.
fn dump(home: &Home, name: &str) -> Vec<u8> {
    let path = home.path().join(name);
    let run = home.run(&["--json", "dump", "-o", path.to_str().unwrap()]);
    let summary = run.json();
    assert_eq!(summary["output"], path.to_str().unwrap());
    std::fs::read(&path).unwrap()
}

// dump / restore: dump → restore → dump is byte-identical
#[tokio::test(flavor = "multi_thread")]
async fn dump_restore_dump_is_byte_identical() {
    let home = Home::new();
    let (_, _, old, _) = write_graph(&home).await;
    home.run(&["add", "Ada planted an orchard in Sintra."]).ok();
    let first = dump(&home, "first.jsonl");
    let text = String::from_utf8(first.clone()).unwrap();
    assert!(text.starts_with(r#"{"record":"header","format":"gralkor-dump","version":1}"#));
    // The invalidated fact, with its times, and the episode.
    let fact = text
        .lines()
        .find(|l| l.contains(&old.uuid.to_string()) && l.contains("RELATES_TO"))
        .expect("the old fact");
    assert!(fact.contains(r#""invalid_at":1740787200000000"#), "{fact}");
    assert!(text.contains("Ada planted an orchard in Sintra."));
    // Standard output carries the same dump, and nothing else.
    let to_stdout = home.run(&["dump"]);
    assert_eq!(to_stdout.ok().stdout, text);

    let other = Home::new();
    let input = home.path().join("first.jsonl");
    let restored = other
        .run(&["--json", "restore", input.to_str().unwrap()])
        .json();
    assert_eq!(restored["graphs"], 1);
    let second = dump(&other, "second.jsonl");
    assert!(
        first == second,
        "the dumps differ:\n{text}\n---\n{}",
        String::from_utf8_lossy(&second)
    );
    // The restored graph answers as the first did.
    let exported = other.run(&["export"]).json();
    assert_eq!(exported["facts"].as_array().unwrap().len(), 2);
}

// dump / restore: a non-empty target and an unknown version are refused (exit 3)
#[tokio::test(flavor = "multi_thread")]
async fn restore_refuses_a_non_empty_target_and_an_unknown_version() {
    let home = Home::new();
    write_graph(&home).await;
    let first = dump(&home, "first.jsonl");
    let input = home.path().join("first.jsonl");
    let run = home.run(&["restore", input.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("needs a server without graphs"),
        "{run:?}"
    );
    let run = home.run(&["restore", "--into-existing", input.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("dump line 2") && run.stderr.contains("exists on the server already"),
        "{run:?}"
    );

    let newer = home.path().join("newer.jsonl");
    let text = String::from_utf8(first).unwrap();
    std::fs::write(&newer, text.replacen("\"version\":1", "\"version\":2", 1)).unwrap();
    let empty = Home::new();
    let run = empty.run(&["restore", newer.to_str().unwrap()]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("dump line 1") && run.stderr.contains("version 2"),
        "{run:?}"
    );
    // A dump that cannot be read is named before anything is started.
    let fresh = Home::new();
    let missing = fresh.path().join("missing.jsonl");
    let run = fresh.run(&["restore", missing.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("missing.jsonl"), "{run:?}");
    assert!(!fresh.data_dir().exists(), "no server was started");
    // Nothing was written.
    let after = empty.run(&["dump"]).ok().stdout.clone();
    assert_eq!(after.lines().count(), 2, "{after}");
}
