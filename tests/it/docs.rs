//! What a newcomer reads first says what they need, in the order they need it: the README's
//! set-up puts `carrier` on `PATH` before any command uses it and says what building and
//! testing cost; the host's guide (`docs/embedding.md`) is linked from the README's top and its
//! code blocks are compiled as doctests; every listing of the runtime file's fields names all of
//! them. (The code blocks themselves run under `cargo test --doc -p carrier`.)

use std::collections::BTreeSet;

use carrier::discovery::RuntimeEntry;
use carrier::protocol::Role;

fn read(path: &str) -> String {
    let path = carrier_test_support::repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the README section headed `## {title}`, up to the next `## `.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let head = format!("\n## {title}\n");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let body = &text[start + head.len()..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

#[test]
fn the_readme_puts_carrier_on_path_before_using_it_and_says_what_building_and_testing_need() {
    let readme = read("README.md");
    let install = readme
        .find("cargo install --locked --path cli")
        .expect("the README says how to install carrier");
    // The first line of a shell block that runs the installed binary.
    let mut at = 0;
    let mut in_shell = false;
    let mut first_use = None;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_shell = line == "```sh";
        } else if in_shell && line.starts_with("carrier ") && first_use.is_none() {
            first_use = Some(at);
        }
        at += line.len() + 1;
    }
    let first_use = first_use.expect("a shell line using carrier");
    assert!(
        install < first_use,
        "carrier is used before it is installed"
    );

    let setup = section(&readme, "Set-up");
    for needed in [
        "~/.cargo/bin",           // where the binary lands, on PATH
        "target/release/carrier", // the binary without installing
        "min",                    // what a first build costs
        "npm registry",           // what `cargo test` needs
        "PyPI",
        "--allow", // `send`'s permission answer, and its default
        "deny",
    ] {
        assert!(
            setup.contains(needed),
            "the set-up section lacks {needed:?}"
        );
    }
    // The owner check and the runtime file's detail live in docs/security.md, linked.
    assert!(setup.contains("(docs/security.md)"));
    assert!(!setup.contains("SO_PEERCRED") && !setup.contains("ticks_since_boot"));
}

#[test]
fn the_embedding_guide_is_linked_from_the_readme_top_and_compiled_as_doctests() {
    let readme = read("README.md");
    let top: String = readme.lines().take(25).collect::<Vec<_>>().join("\n");
    assert!(top.contains("(docs/embedding.md)"), "{top}");
    let lib = read("src/lib.rs");
    assert!(
        lib.contains(r#"#[doc = include_str!("../docs/embedding.md")]"#),
        "the guide's code blocks are not doctests"
    );
    let guide = read("docs/embedding.md");
    for topic in [
        "start_mounted_at",
        "DeliveryClass::Bulk",
        "broadcast_bulk",
        "send_bulk_to",
        "DeliveryClass::Lossy",
        "set_lossy_budget",
        "0–13 fps",
        "inbound_backlog",
        "16 MiB",
        "host_to_clients",
        "Auth::Token",
        "tracing",
        "carrier_server",
        "spans",
        "stop().await",
        "client.abort(",
        "ClientEvent::State",
        "json::<",
        "Role::Observe",
    ] {
        assert!(guide.contains(topic), "the guide does not cover {topic:?}");
    }
}

#[test]
fn every_listing_of_the_runtime_files_fields_names_them_all() {
    let entry = RuntimeEntry::for_this_process(7070, Role::Drive, Some("t".into()))
        .with_socket("/run/user/1000/carrier/1.sock");
    let value = serde_json::to_value(&entry).expect("serializes");
    let mut fields: BTreeSet<String> = value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    // Written on Linux only; the listings name it everywhere.
    fields.insert("pid_start".into());
    for (path, marker) in [
        ("docs/protocol.md", "{pid, url,"),
        ("docs/security.md", "{pid, url,"),
        ("server/src/transport.rs", "{pid, url,"),
    ] {
        let text = read(path);
        let start = text
            .find(marker)
            .unwrap_or_else(|| panic!("{path} lists no runtime file fields"));
        let listing = &text[start + 1..start + text[start..].find('}').expect("closed")];
        let listed: BTreeSet<String> = listing
            .split(',')
            .map(|f| f.trim().trim_start_matches("///").trim().to_owned())
            .collect();
        assert_eq!(listed, fields, "{path}");
    }
}
