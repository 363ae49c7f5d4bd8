//! The layer rule of `src/lib.rs`: each room imports only from rooms below it, so
//! there is no import circle between rooms, and the storage port imports neither the
//! engine nor an adapter (the engine implements the port; the words they share live
//! in `vocab`, below every other room). Reads the sources themselves; comments, doc
//! links and unit-test modules are not imports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each room's height; a room may name rooms strictly lower, and itself.
fn height(room: &str) -> Option<u32> {
    Some(match room {
        "vocab" | "retry" | "cache" => 0,
        "falkordb" | "llm" => 1,
        "config" | "ontology" => 2,
        "storage" => 3,
        "graph" => 4,
        "access" => 5,
        "destination" => 6,
        "lens" => 7,
        "reflection" => 8,
        "runtime" => 9,
        "client" => 10,
        "agent" => 11,
        _ => return None,
    })
}

/// Rooms below a room that it still must not name: the storage port is over the
/// shared vocabulary only, never over the engine or the database adapter.
fn forbidden(room: &str) -> &'static [&'static str] {
    match room {
        "storage" => &["graph", "falkordb"],
        _ => &[],
    }
}

/// The source roots of the two library crates.
fn roots() -> [PathBuf; 2] {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    [manifest.join("src"), manifest.join("core/src")]
}

#[test]
fn the_storage_port_is_a_crate_that_cannot_depend_on_the_engine() {
    // The compiler's half of the layer rule: `gralkor-core` (error, vocab, ontology,
    // storage) has no normal dependency on `gralkor`, so nothing in it can name the
    // engine or an adapter; only its doc examples use `gralkor` (a dev-dependency).
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("core/Cargo.toml"))
            .unwrap();
    let normal = manifest
        .split("[dev-dependencies]")
        .next()
        .unwrap()
        .split("[dependencies]")
        .nth(1)
        .expect("core/Cargo.toml has [dependencies]");
    assert!(
        !normal
            .lines()
            .any(|l| l.trim_start().starts_with("gralkor")),
        "{normal}"
    );
    for room in ["storage", "vocab", "ontology"] {
        assert!(
            !Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src")
                .join(room)
                .exists(),
            "src/{room} must live in core/src"
        );
    }
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The rooms a source file names through `crate::<room>`, outside comments and
/// before its unit tests.
fn named_rooms(text: &str) -> Vec<String> {
    let mut rooms = Vec::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + 7..];
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a::X, b, …}`: the first name of each top-level item.
                let (mut depth, mut item_start) = (0, true);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && (c.is_ascii_alphanumeric() || c == '_') => {
                            item_start = false;
                            rooms.push(ident(&group[i..]));
                        }
                        _ => {}
                    }
                }
            } else {
                rooms.push(ident(rest));
            }
        }
    }
    rooms
}

#[test]
fn every_room_imports_only_from_rooms_below_it() {
    // Both crates: `gralkor` and `gralkor-core` (vocab, ontology, storage), whose
    // rooms keep their names (re-exported at the same paths).
    let mut files = Vec::new();
    for root in roots() {
        let mut here = Vec::new();
        sources(&root, &mut here);
        files.extend(here.into_iter().map(|f| (root.clone(), f)));
    }
    let mut upward: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    for (src, file) in files {
        let rel = file.strip_prefix(&src).unwrap();
        let room = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(own) = height(&room) else {
            continue; // lib.rs (re-exports) and error.rs (shared by every room)
        };
        if rel
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("tests.rs"))
        {
            continue;
        }
        checked += 1;
        let text = std::fs::read_to_string(&file).unwrap();
        for named in named_rooms(&text) {
            if named == "Error" || named == "Result" || named == "error" || named == room {
                continue;
            }
            // `crate::provenance` is the storage room's, re-exported at the top.
            let target = if named == "provenance" {
                "storage"
            } else {
                named.as_str()
            };
            if target == room {
                continue;
            }
            match height(target) {
                Some(_) if forbidden(&room).contains(&target) => upward
                    .entry(rel.display().to_string())
                    .or_default()
                    .push(named.clone()),
                Some(h) if h < own => {}
                Some(_) => upward
                    .entry(rel.display().to_string())
                    .or_default()
                    .push(named.clone()),
                None => panic!("{}: names an unknown room `crate::{named}`", rel.display()),
            }
        }
    }
    assert!(checked > 50, "only {checked} files were read");
    assert!(
        upward.is_empty(),
        "imports from a room at or above, or forbidden: {upward:#?}"
    );
}

#[test]
fn the_storage_port_names_neither_the_engine_nor_the_adapter_even_in_docs() {
    // Stricter than the layer rule: not even a doc link, so the port reads without
    // the engine. The engine's implementation of the port lives with the engine.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src/storage");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    assert!(!files.is_empty());
    assert!(
        !dir.join("native.rs").exists(),
        "the native storage belongs to the engine"
    );
    let mut named = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("crate::graph") || line.contains("crate::falkordb") {
                named.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(named.is_empty(), "{named:#?}");
}

/// Where Cypher text may be written: the engine's store and search, and the FalkorDB
/// adapter. Everyone else (the capture buffer, the embedded authorizer, the storage
/// port, the memory API) calls their functions.
const CYPHER_ROOMS: [&str; 3] = ["falkordb/", "graph/store/", "graph/search/"];

#[test]
fn cypher_is_written_only_in_the_engines_store_and_search_and_the_adapter() {
    let mut files = Vec::new();
    for root in roots() {
        let mut here = Vec::new();
        sources(&root, &mut here);
        files.extend(here.into_iter().map(|f| (root.clone(), f)));
    }
    let mut outside = Vec::new();
    for (src, file) in files {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        if CYPHER_ROOMS.iter().any(|r| rel.starts_with(r)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") {
                continue;
            }
            if [
                "\"MATCH ",
                "\"MERGE ",
                "\"UNWIND ",
                "\"CREATE ",
                "\"OPTIONAL MATCH ",
                "\"CALL ",
            ]
            .iter()
            .any(|k| code.contains(k))
            {
                outside.push(format!("{rel}:{}: {code}", n + 1));
            }
        }
    }
    assert!(outside.is_empty(), "Cypher outside the store: {outside:#?}");
}

#[test]
fn the_reader_sees_imports_and_skips_comments_and_tests() {
    let text = "use crate::graph::Timestamp;\nuse crate::{Error, storage::{A, B}};\n/// [`x`](crate::agent::y)\nlet a = crate::llm::f(); // crate::client\n#[cfg(test)]\nuse crate::client::Z;\n";
    assert_eq!(named_rooms(text), ["graph", "Error", "storage", "llm"]);
}
