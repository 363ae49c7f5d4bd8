use super::*;
use crate::lens::Lens;
use crate::reflection::{OutputType, Reflection, Step};

fn err(config: RuntimeConfig) -> String {
    let e = config.build().unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e:?}");
    e.to_string()
}

fn reflection(name: &str, destination: &str) -> Reflection {
    Reflection::new(name, destination)
        .step(Step::new("review", "Review it.").output("assessment", OutputType::String))
}

#[test]
fn packaged_definitions_are_always_installed() {
    let s = Snapshot::packaged();
    let names: Vec<_> = s.destinations().iter().map(|d| d.name()).collect();
    assert_eq!(names, ["personal", "global"]);
    let chat = s.lens("lens", "personal-chat").unwrap();
    assert_eq!(chat.destination(), "personal");
    assert!(!chat.is_replace_graph());
    assert!(chat.ontology().is_some());
    assert!(s.reflections().is_empty());
}

#[test]
fn a_valid_config_keeps_registration_order() {
    let s = RuntimeConfig::new()
        .destination("b-app")
        .destination("a-app")
        .destination("global/x")
        .lens(Lens::appending("observations", "a-app"))
        .lens(Lens::replace_graph("systems", "global"))
        .reflection(reflection("release-review", "b-app"))
        .build()
        .unwrap();
    let names: Vec<_> = s.destinations().iter().map(|d| d.name()).collect();
    assert_eq!(names, ["personal", "global", "b-app", "a-app", "global/x"]);
    let lenses: Vec<_> = s.lenses().iter().map(|l| l.name()).collect();
    assert_eq!(lenses, ["personal-chat", "observations", "systems"]);
    assert_eq!(
        s.reflection("reflection", "release-review")
            .unwrap()
            .destination(),
        "b-app"
    );
}

#[test]
fn destination_errors_name_the_entry_and_rule() {
    assert!(
        err(RuntimeConfig::new().destination(" ")).contains("destinations[0]` must not be blank")
    );
    assert!(
        err(RuntimeConfig::new().destination("x").destination("x"))
            .contains("destinations[1]` `x` is registered twice")
    );
    assert!(err(RuntimeConfig::new().destination("global")).contains("packaged Destination"));
    assert!(err(RuntimeConfig::new().destination("personal")).contains("packaged Destination"));
    assert!(
        err(RuntimeConfig::new().destination("personal/a")).contains("reserved prefix `personal/`")
    );
    assert!(
        err(RuntimeConfig::new().destination("operator/a")).contains("reserved prefix `operator/`")
    );
    let e = err(RuntimeConfig::new().destination("operator"));
    assert!(e.contains("retired") && e.contains("personal-chat"), "{e}");
}

#[test]
fn lens_errors_name_the_lens_and_rule() {
    let e = err(RuntimeConfig::new().lens(Lens::appending("", "global")));
    assert!(e.contains("lenses[0].name` must not be blank"), "{e}");
    let e = err(RuntimeConfig::new()
        .lens(Lens::appending("a", "global"))
        .lens(Lens::replace_graph("a", "global")));
    assert!(e.contains("lenses[a].name` `a` is registered twice"), "{e}");
    let e = err(RuntimeConfig::new().lens(Lens::appending("personal-chat", "global")));
    assert!(e.contains("packaged Lens"), "{e}");
    let e = err(RuntimeConfig::new().lens(Lens::appending("operator", "personal")));
    assert!(e.contains("retired") && e.contains("personal-chat"), "{e}");
    let e = err(RuntimeConfig::new().lens(Lens::appending("default", "personal")));
    assert!(e.contains("not an alias"), "{e}");
    let e = err(RuntimeConfig::new().lens(Lens::appending("a [lens: b", "global")));
    assert!(
        e.contains("lenses[0].name") && e.contains("delimiter"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().lens(Lens::appending("x", "nowhere")));
    assert!(
        e.contains("lenses[x].destination` names unknown Destination `nowhere`"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().lens(Lens::replace_graph("x", "operator")));
    assert!(
        e.contains("lenses[x].destination") && e.contains("retired"),
        "{e}"
    );
}

#[test]
fn reflection_errors_name_the_reflection_and_rule() {
    let e = err(RuntimeConfig::new().reflection(reflection("generalisations", "global")));
    assert!(e.contains("packaged Reflection"), "{e}");
    let e = err(RuntimeConfig::new()
        .reflection(reflection("r", "global"))
        .reflection(reflection("r", "personal")));
    assert!(
        e.contains("reflections[r].name` `r` is declared twice"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().reflection(reflection("r", "elsewhere")));
    assert!(
        e.contains("reflections[r].destination` names unknown Destination"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().reflection(reflection("x[gralkor: direct]", "global")));
    assert!(e.contains("delimiter"), "{e}");
    let e = err(RuntimeConfig::new().reflection(Reflection::new("r", "global")));
    assert!(e.contains("reflections[r].steps"), "{e}");
    // A Lens and a Reflection may share a name: separate namespaces.
    RuntimeConfig::new()
        .lens(Lens::appending("same", "global"))
        .reflection(reflection("same", "global"))
        .build()
        .unwrap();
}

#[test]
fn protected_ontology_names_never_reach_a_snapshot() {
    use crate::ontology::{EntityMode, EntityType, Ontology, RelationshipMode};
    for label in ["Entity", "Episodic", "Community"] {
        let built = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
            .entity(EntityType::new(label))
            .build();
        assert!(
            built.unwrap_err().to_string().contains("reserved"),
            "{label}"
        );
    }
    let person = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(EntityType::new("Person"))
        .build()
        .unwrap();
    RuntimeConfig::new()
        .lens(Lens::appending("people", "global").ontology(person))
        .build()
        .unwrap();
}

#[test]
fn call_time_resolution_names_unknown_and_retired_names() {
    let s = Snapshot::packaged();
    let e = s
        .destination("destinations[1]", "nowhere")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("destinations[1]") && e.contains("nowhere"),
        "{e}"
    );
    let e = s
        .destination("destination", "operator")
        .unwrap_err()
        .to_string();
    assert!(e.contains("retired"), "{e}");
    let e = s.lens("lens", "operator").unwrap_err().to_string();
    assert!(e.contains("personal-chat"), "{e}");
    let e = s.lens("lens", "nope").unwrap_err().to_string();
    assert!(e.contains("names no registered Lens"), "{e}");
}

#[test]
fn replacement_is_atomic_and_operations_keep_their_snapshot() {
    let runtime = Runtime::new(RuntimeConfig::new().destination("one")).unwrap();
    let held = runtime.snapshot();
    runtime
        .replace(RuntimeConfig::new().destination("two"))
        .unwrap();
    // The held snapshot is unchanged; the new one is current.
    assert!(held.destination("d", "one").is_ok());
    assert!(held.destination("d", "two").is_err());
    let now = runtime.snapshot();
    assert!(now.destination("d", "two").is_ok());
    assert!(now.destination("d", "one").is_err());
    // An invalid replacement leaves the current snapshot in force.
    let e = runtime.replace(
        RuntimeConfig::new()
            .destination("three")
            .lens(Lens::appending("l", "missing")),
    );
    assert!(e.is_err());
    assert!(Arc::ptr_eq(&now, &runtime.snapshot()));
}

#[test]
fn concurrent_readers_see_whole_snapshots() {
    let runtime = Arc::new(Runtime::packaged());
    let writer = {
        let runtime = runtime.clone();
        std::thread::spawn(move || {
            for i in 0..200 {
                let name = format!("d{i}");
                runtime
                    .replace(
                        RuntimeConfig::new()
                            .destination(name.clone())
                            .lens(Lens::appending(format!("l{i}"), name)),
                    )
                    .unwrap();
            }
        })
    };
    for _ in 0..2000 {
        let s = runtime.snapshot();
        // Every snapshot is internally consistent: its Lens's Destination is in it.
        for lens in s.lenses() {
            assert!(s.destination("d", lens.destination()).is_ok());
        }
    }
    writer.join().unwrap();
}

#[test]
fn names_are_bounded_and_nul_free_at_configuration_time() {
    let long = "l".repeat(5000);
    let e = err(RuntimeConfig::new().lens(Lens::appending(long.as_str(), "global")));
    assert!(
        e.contains("`lenses[0].name` must be at most 256 bytes (got 5000)"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().lens(Lens::replace_graph("a\0b", "global")));
    assert!(
        e.contains("`lenses[0].name` must not contain NUL characters"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().destination(long.as_str()));
    assert!(
        e.contains("`destinations[0]` must be at most 256 bytes (got 5000)"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().destination("d\0"));
    assert!(
        e.contains("`destinations[0]` must not contain NUL characters"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().reflection(reflection(&long, "global")));
    assert!(
        e.contains("`reflections[0].name` must be at most 256 bytes (got 5000)"),
        "{e}"
    );
    let e = err(RuntimeConfig::new().reflection(reflection("r\0", "global")));
    assert!(
        e.contains("`reflections[0].name` must not contain NUL characters"),
        "{e}"
    );
    // Multi-byte characters count in bytes; exactly the limit is fine.
    let e = err(RuntimeConfig::new().lens(Lens::appending("é".repeat(129), "global")));
    assert!(e.contains("must be at most 256 bytes (got 258)"), "{e}");
    let at_limit = "d".repeat(256);
    RuntimeConfig::new()
        .destination(at_limit.as_str())
        .lens(Lens::appending("l".repeat(256), at_limit.as_str()))
        .reflection(reflection(&"r".repeat(256), at_limit.as_str()))
        .build()
        .unwrap();
}
