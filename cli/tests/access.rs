//! The `gralkor` command line with an authorizer (`--authorizer embedded`, the
//! relationships in the same embedded FalkorDB): who asks (`--as`), `groups` and
//! `add-member` (test-trees/cli.md, "access").

mod common;

use common::Home;
use serde_json::Value;

fn episode_uuids(results: &Value) -> Vec<String> {
    results
        .as_array()
        .expect("a list of results")
        .iter()
        .filter(|r| r["hit"]["type"] == "episode")
        .filter_map(|r| r["hit"]["uuid"].as_str().map(str::to_string))
        .collect()
}

fn added_uuid(v: &Value) -> String {
    v["episodes"][0]
        .as_str()
        .expect("an episode uuid")
        .to_string()
}

/// `groups --json` as a map group → members.
fn groups(home: &Home, subject: &str) -> Vec<(String, Vec<String>)> {
    home.run_guarded("ada", subject, &["--json", "groups"])
        .json()
        .as_array()
        .expect("a list of groups")
        .iter()
        .map(|g| {
            let members = g["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_string())
                .collect();
            (g["group"].as_str().unwrap().to_string(), members)
        })
        .collect()
}

// access / ada's personal memory: hers to write and read, not bob's
#[test]
fn ada_writes_and_finds_her_personal_memory_and_bob_cannot_reach_it() {
    let home = Home::new();
    let ada = |args: &[&str]| home.run_guarded("ada", "person:ada", args);
    let bob = |args: &[&str]| home.run_guarded("ada", "person:bob", args);
    let added = ada(&["--json", "add", "Ada keeps the spare key under the fern"]).json();
    assert_eq!(added["destination"], "personal");
    let uuid = added_uuid(&added);
    assert_eq!(
        episode_uuids(&ada(&["--json", "search", "spare key"]).json()),
        [uuid.as_str()]
    );
    assert_eq!(
        ada(&["--json", "get", &uuid]).json()["episode"]["uuid"],
        uuid.as_str()
    );

    // Bob names Ada's operator id: he finds nothing, cannot read or forget it.
    assert_eq!(
        episode_uuids(&bob(&["--json", "search", "spare key"]).json()),
        Vec::<String>::new()
    );
    assert_eq!(bob(&["get", &uuid]).code, 4);
    assert_eq!(bob(&["--json", "episodes"]).json(), serde_json::json!([]));
    let status = bob(&["--json", "status"]).json();
    assert!(
        !status["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "personal"),
        "{status}"
    );
    assert_eq!(bob(&["forget", "episode", &uuid]).code, 4);
    // Nor write to her personal graph, nor make himself a member of it: refused, exit 6,
    // one line.
    let write = bob(&["--json", "add", "Bob was here"]);
    assert_eq!(write.code, 6, "{write:?}");
    let error: Value = serde_json::from_str(&write.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "permission_denied");
    assert_eq!(write.stderr.lines().count(), 1, "{write:?}");
    assert!(write.stderr.contains("permission denied"), "{write:?}");
    let join = bob(&["add-member", "personal/ada", "person:bob"]);
    assert_eq!(join.code, 6, "{join:?}");
    assert!(join.stderr.contains("personal/ada"), "{join:?}");
    // Her export is hers alone too, and only she may purge her.
    assert_eq!(bob(&["export"]).code, 6);
    assert_eq!(bob(&["forget", "operator", "ada"]).code, 6);
    // And it is all still there for Ada.
    assert_eq!(
        episode_uuids(&ada(&["--json", "search", "spare key"]).json()),
        [uuid.as_str()]
    );
    assert!(
        !groups(&home, "person:bob")
            .iter()
            .any(|(g, _)| g == "personal/ada")
    );
}

// access / a shared group: founded by ada, who adds bob; then bob lists it
#[test]
fn ada_founds_a_group_adds_bob_and_bob_lists_it_but_carol_cannot_join() {
    let home = Home::new();
    assert!(groups(&home, "person:bob").is_empty());
    let founded = home
        .run_guarded(
            "ada",
            "person:ada",
            &["--json", "add-member", "team-x", "person:bob"],
        )
        .json();
    assert_eq!(founded["group"], "team-x");
    assert_eq!(founded["member"], "person:bob");
    assert_eq!(founded["founded"], true);
    assert_eq!(founded["written"], true);
    let listed = groups(&home, "person:bob");
    assert_eq!(
        listed,
        [(
            "team-x".to_string(),
            vec!["person:ada".to_string(), "person:bob".to_string()]
        )]
    );
    // A member adds an agent; adding it again writes nothing.
    let agent = home
        .run_guarded(
            "ada",
            "person:bob",
            &["--json", "add-member", "team-x", "agent:susu"],
        )
        .json();
    assert_eq!(
        (agent["founded"].clone(), agent["written"].clone()),
        (false.into(), true.into())
    );
    let again = home
        .run_guarded(
            "ada",
            "person:bob",
            &["--json", "add-member", "team-x", "agent:susu"],
        )
        .json();
    assert_eq!(again["written"], false);
    // Carol is no member of a group that has members: refused.
    let carol = home.run_guarded(
        "ada",
        "person:carol",
        &["add-member", "team-x", "person:carol"],
    );
    assert_eq!(carol.code, 6, "{carol:?}");
    assert!(
        carol.stderr.contains("only a member may add members"),
        "{carol:?}"
    );
    assert!(groups(&home, "person:carol").is_empty());
    // A malformed member is invalid input naming it.
    let bad = home.run_guarded("ada", "person:ada", &["add-member", "team-x", "mom"]);
    assert_eq!(bad.code, 3, "{bad:?}");
    assert!(bad.stderr.contains("`member`"), "{bad:?}");
}

// access / configuration: an authorizer needs --as; groups need an authorizer
#[test]
fn an_authorizer_without_a_subject_and_groups_without_an_authorizer_are_usage_errors() {
    let home = Home::new();
    let run = home
        .command()
        .args(["--text-only", "--operator", "ada", "search", "tea"])
        .env("GRALKOR_AUTHORIZER", "embedded")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    let stderr = String::from_utf8(run.stderr).unwrap();
    assert!(
        stderr.contains("GRALKOR_SUBJECT") && stderr.contains("--as"),
        "{stderr}"
    );
    assert!(!home.data_dir().exists(), "nothing was started");
    for what in [&["groups"][..], &["add-member", "team-x", "person:bob"][..]] {
        let run = home.run(what);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("needs an authorizer"), "{run:?}");
    }
    // The subject comes from GRALKOR_SUBJECT as well; a malformed one is a usage error.
    let run = home
        .command()
        .args([
            "--text-only",
            "--authorizer",
            "embedded",
            "--json",
            "groups",
        ])
        .env("GRALKOR_SUBJECT", "person:ada")
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let bad = home.run_raw(&[
        "--text-only",
        "--authorizer",
        "embedded",
        "--as",
        "ada",
        "groups",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("person:ID or agent:ID"), "{bad:?}");
}

// access / a SpiceDB server (--authorizer spicedb): the same rules through the network
#[cfg(feature = "spicedb")]
#[test]
fn with_a_spicedb_server_ada_and_bob_are_kept_apart_and_a_wrong_key_is_refused() {
    // A real SpiceDB (the embedded library) served on loopback over gRPC, as a SpiceDB
    // server is reached: the runtime keeps serving while the commands run.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let key = format!("key-{}", uuid::Uuid::new_v4().simple());
    let (_authz, server) = rt.block_on(async {
        let authz = gralkor::access::SpiceDbAuthorizer::start_embedded()
            .await
            .expect("an embedded SpiceDB (the library comes from the npm registry)");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = authz.serve(listener, &key).unwrap();
        (authz, server)
    });
    let endpoint = server.endpoint();
    let home = Home::new();
    let run = |subject: &str, key: &str, args: &[&str]| {
        let output = home
            .command()
            .args(["--text-only", "--authorizer", "spicedb"])
            .args(["--operator", "ada", "--as", subject])
            .env("GRALKOR_SPICEDB_ENDPOINT", &endpoint)
            .env("GRALKOR_SPICEDB_KEY", key)
            .args(args)
            .output()
            .unwrap();
        common::Run::from(output)
    };
    let added = run(
        "person:ada",
        &key,
        &["--json", "add", "Ada hid the key in the teapot"],
    )
    .json();
    let uuid = added_uuid(&added);
    assert_eq!(
        episode_uuids(&run("person:ada", &key, &["--json", "search", "teapot"]).json()),
        [uuid.as_str()]
    );
    assert!(
        episode_uuids(&run("person:bob", &key, &["--json", "search", "teapot"]).json()).is_empty()
    );
    let intruder = run("person:bob", &key, &["add", "Bob was here"]);
    assert_eq!(intruder.code, 6, "{intruder:?}");

    let refused = run("person:ada", "not-the-key", &["search", "teapot"]);
    assert_eq!(refused.code, 5, "{refused:?}");
    assert!(
        refused.stderr.contains("spicedb.preshared_key"),
        "{refused:?}"
    );
    let no_endpoint = common::Run::from(
        home.command()
            .args([
                "--text-only",
                "--authorizer",
                "spicedb",
                "--operator",
                "ada",
            ])
            .args(["--as", "person:ada", "search", "teapot"])
            .env("GRALKOR_SPICEDB_KEY", &key)
            .output()
            .unwrap(),
    );
    assert_eq!(no_endpoint.code, 2, "{no_endpoint:?}");
    assert!(
        no_endpoint.stderr.contains("--spicedb-endpoint"),
        "{no_endpoint:?}"
    );
    assert!(server.refused_calls() >= 1);

    // `schema-write` writes (again: idempotent) the schema, with neither operator nor
    // subject; a wrong key is refused.
    let schema = |key: &str| {
        common::Run::from(
            home.command()
                .args(["--json", "schema-write"])
                .env("GRALKOR_SPICEDB_ENDPOINT", &endpoint)
                .env("GRALKOR_SPICEDB_KEY", key)
                .output()
                .unwrap(),
        )
    };
    let written = schema(&key).json();
    assert_eq!(written["schema"], "written", "{written}");
    assert_eq!(written["endpoint"], endpoint.as_str(), "{written}");
    let refused = schema("not-the-key");
    assert_eq!(refused.code, 5, "{refused:?}");
}

// access / `episodes --last N` lists the N newest the subject may see, past newer hidden ones
#[test]
fn episodes_last_n_lists_the_newest_the_subject_may_see() {
    use std::sync::Arc;
    use std::time::Duration;

    use gralkor::NativeClient;
    use gralkor::NativeStorage;
    use gralkor::access::{EmbeddedAuthorizer, Subject};
    use gralkor::client::{Client, Content, MemoryAdd, OperatorId};
    use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
    use gralkor::graph::Engine;
    use gralkor::runtime::{Runtime, RuntimeConfig};

    let home = Home::new();
    // Ada's personal memory, written with the library: two episodes involving Bob,
    // then three newer ones that do not.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let server = EmbeddedServer::start(&EmbeddedConfig::new(home.data_dir()))
            .await
            .unwrap();
        let db = FalkorDb::attach(&server, Duration::from_secs(60))
            .await
            .unwrap();
        let client = NativeClient::from_parts(
            Runtime::new(RuntimeConfig::new()).unwrap(),
            NativeStorage::new(Engine::episodes_only(db.clone())),
        )
        .with_authorizer(Arc::new(EmbeddedAuthorizer::new(db.clone())))
        .unwrap();
        let ada_op = OperatorId::new("ada").unwrap();
        let (ada, bob) = (
            Subject::person("ada").unwrap(),
            Subject::person("bob").unwrap(),
        );
        for (text, involves_bob) in [
            ("bob-one", true),
            ("bob-two", true),
            ("ada-one", false),
            ("ada-two", false),
            ("ada-three", false),
        ] {
            let mut add = MemoryAdd::new(&ada_op, Content::document(text)).subject(ada.clone());
            if involves_bob {
                add = add.involves([bob.clone()]);
            }
            client.memory_add(&add).await.unwrap();
            client.await_background_writes().await;
        }
        client.shutdown().await.unwrap();
        server.shutdown().await.unwrap();
    });
    let contents = |subject: &str| -> std::collections::BTreeSet<String> {
        home.run_guarded("ada", subject, &["--json", "episodes", "--last", "2"])
            .json()
            .as_array()
            .expect("a list of episodes")
            .iter()
            .map(|l| l["episode"]["content"].as_str().unwrap().to_string())
            .collect()
    };
    // The two newest are Ada's, hidden from Bob: he still gets two, his.
    assert_eq!(
        contents("person:bob"),
        ["bob-one", "bob-two"].map(String::from).into()
    );
    assert_eq!(contents("person:ada").len(), 2);
    assert!(contents("person:ada").iter().all(|c| c.starts_with("ada-")));
}

// access / a configuration file: `${VAR}` interpolated, the default group's members
// written at startup, flags and variables over the file
#[test]
fn a_config_file_names_the_default_group_whose_members_are_let_in_at_startup() {
    let home = Home::new();
    let file = home.dir.path().join("gralkor.json");
    std::fs::write(
        &file,
        r#"{
            "GRALKOR_AUTHORIZER": "embedded",
            "GRALKOR_SUBJECT": "agent:${TEST_AGENT_ID}",
            "GRALKOR_DEFAULT_GROUP": "main",
            "GRALKOR_DEFAULT_GROUP_MEMBERS": ["agent:${TEST_AGENT_ID}", "person:bob"]
        }"#,
    )
    .unwrap();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = home.command();
        cmd.args(["--text-only", "--operator", "ada", "--config"])
            .arg(&file)
            .args(args)
            .env("TEST_AGENT_ID", "my-agent");
        for (k, v) in env {
            cmd.env(k, v);
        }
        common::Run::from(cmd.output().unwrap())
    };
    let listed = |r: common::Run| -> Vec<(String, Vec<String>)> {
        r.json()
            .as_array()
            .expect("a list of groups")
            .iter()
            .map(|g| {
                let mut members: Vec<String> = g["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap().to_string())
                    .collect();
                members.sort();
                (g["group"].as_str().unwrap().to_string(), members)
            })
            .collect()
    };
    let main = vec![(
        "main".to_string(),
        vec!["agent:my-agent".to_string(), "person:bob".to_string()],
    )];
    // The subject comes from the file (`${TEST_AGENT_ID}` expanded); no add-member ran.
    assert_eq!(listed(run(&[], &["--json", "groups"])), main);
    // A flag wins over the file: bob, a configured member, reads the group too…
    assert_eq!(
        listed(run(&[], &["--as", "person:bob", "--json", "groups"])),
        main
    );
    // …and a variable wins over the file: carol is no member.
    assert_eq!(
        listed(run(
            &[("GRALKOR_SUBJECT", "person:carol")],
            &["--json", "groups"]
        )),
        Vec::<(String, Vec<String>)>::new()
    );
    // The default group is a registered Destination: `--destination main` is known.
    run(&[], &["--json", "search", "-d", "main", "anything"]).ok();
    // `import` without `--lens` writes the workspace to the default group, as the
    // plugin imports to its `defaultGroupId`; its members find it there.
    let workspace = home.dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("MEMORY.md"),
        "The harbour crane is serviced on Fridays.",
    )
    .unwrap();
    let imported = run(
        &[],
        &[
            "--json",
            "import",
            "--workspace",
            workspace.to_str().unwrap(),
        ],
    )
    .json();
    assert_eq!(imported["lens"], "default-group", "{imported}");
    assert_eq!(imported["written"], 1, "{imported}");
    let found = run(
        &[],
        &[
            "--as",
            "person:bob",
            "--json",
            "search",
            "-d",
            "main",
            "harbour crane",
        ],
    )
    .json();
    assert_eq!(episode_uuids(&found).len(), 1, "{found}");

    // A variable the file names that is not set: a configuration error (exit 5)
    // naming the key and the variable, before anything starts.
    std::fs::write(&file, r#"{"GRALKOR_SPICEDB_KEY": "${TEST_UNSET_TOKEN}"}"#).unwrap();
    let missing = run(&[], &["status"]);
    assert_eq!(missing.code, 5, "{missing:?}");
    assert!(
        missing.stderr.contains("GRALKOR_SPICEDB_KEY")
            && missing.stderr.contains("TEST_UNSET_TOKEN"),
        "{missing:?}"
    );
    // An unknown key is refused naming it.
    std::fs::write(&file, r#"{"GRALKOR_DATADIR": "/tmp/x"}"#).unwrap();
    let typo = run(&[], &["status"]);
    assert_eq!(typo.code, 5, "{typo:?}");
    assert!(typo.stderr.contains("GRALKOR_DATADIR"), "{typo:?}");
}
