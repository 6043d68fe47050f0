//! One figure for the whole process (docs/protocol.md, "Delivery and memory"):
//! every session's history and resume ring share one process-wide budget, and a client that fills
//! many sessions keeps the carrier under the README's "Memory bounds" figure. When the budget is
//! full the least recently used sessions lose their oldest entries first: a resume past them
//! reports `gap`, and their history starts later.
//!
//! A real `carrier serve` child, one `tokio-tungstenite` client over 127.0.0.1, and the
//! child's peak resident memory (`VmHWM`) against the figure computed from the flags it runs
//! with: the README's figure is `carrier serve`'s. (Sessions evicting each other while their
//! streams run is the agent layer's test: `agent/tests/it/session_memory.rs`.)

use carrier_test_support as support;

use futures_util::StreamExt;
use serde_json::{json, Value};
use support::figure::Flags;
use support::serve_process::{gauge, peak_rss_kib, Serve};
use support::Client;
use tokio_tungstenite::tungstenite::Message;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A prompt of `len` bytes that names its session and turn.
fn prompt(session: &str, turn: u32, len: usize) -> String {
    let mut p = format!("{session}-t{turn}-");
    p.extend(std::iter::repeat_n('x', len - p.len()));
    p
}

/// Runs `turns` turns of `len`-byte prompts in the bound session; returns its last seq.
async fn fill(c: &mut Client, session: &str, turns: u32, len: usize) -> u64 {
    let mut last_seq = 0;
    for turn in 1..=turns {
        let turn_id = c.submit(&prompt(session, turn, len)).await;
        assert_eq!(turn_id, format!("t{turn}"));
        last_seq = completed(c, &turn_id).await;
    }
    last_seq
}

/// Reads the bound session's events up to the `turn_completed` of `turn_id` (not aborted) and
/// returns its seq. Only each event's head and tail are read: the events carry the 1 MiB
/// prompt and reply, which the test has no need to decode.
async fn completed(c: &mut Client, turn_id: &str) -> u64 {
    loop {
        let message = tokio::time::timeout(support::WAIT, c.ws.next())
            .await
            .expect("an event in time")
            .expect("the connection is open")
            .expect("a frame");
        let Message::Text(text) = message else {
            continue;
        };
        let text = text.as_str();
        let Some(rest) = text.strip_prefix(r#"{"event":"session.turn_completed","seq":"#) else {
            assert!(text.starts_with(r#"{"event":"session."#), "{:.200}", text);
            continue;
        };
        let (seq, payload) = rest.split_once(',').expect("seq, payload");
        let head = format!(r#""payload":{{"turn_id":"{turn_id}","#);
        assert!(payload.starts_with(&head), "{:.200}", text);
        assert!(
            text.ends_with(r#""aborted":false}}"#),
            "{}",
            &text[text.len() - 80..]
        );
        return seq.parse().expect("seq");
    }
}

fn turn_ids(history: &Value) -> Vec<String> {
    history["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["turn_id"].as_str().expect("turn_id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_sessions_of_one_mib_turns_stay_within_the_figure_and_the_oldest_lose_first() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    const SESSIONS: usize = 64;
    const TURNS: u32 = 3;
    // A bit under the 1 MiB soft limit, which counts the request's envelope too.
    const PROMPT: usize = (1 << 20) - 1024;

    let flags = Flags::defaults();
    let args = flags.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start(&args).await.expect("serve");
    let figure = flags.readme_figure(1, 0);

    let (mut c, hs) = serve.client().await;
    assert_eq!(hs["limits"]["max_session_bytes"], flags.max_session_bytes);
    assert_eq!(hs["limits"]["max_sessions"], SESSIONS as u64);
    let epoch = hs["epoch"].as_str().expect("epoch").to_owned();
    let first = hs["session_id"].as_str().expect("session_id").to_owned();

    // The default session and 63 more, each filled with three turns of 1 MiB prompts (their
    // events and history entries: about 5 MiB a turn, 8 MiB a session within its own bounds).
    let mut last_seqs = vec![(first.clone(), fill(&mut c, &first, TURNS, PROMPT).await)];
    for _ in 1..SESSIONS {
        let started = c.ok("sessions.start", json!({})).await;
        let id = started["session_id"]
            .as_str()
            .expect("session_id")
            .to_owned();
        let last = fill(&mut c, &id, TURNS, PROMPT).await;
        last_seqs.push((id, last));
    }

    let peak = peak_rss_kib(serve.pid) * KIB;
    eprintln!(
        "peak resident memory: {} MiB; the README's figure for one connection: {} MiB",
        peak / MIB,
        figure / MIB
    );
    assert!(
        peak < figure,
        "peak resident memory {peak} B is over the README's figure {figure} B"
    );

    let in_use = gauge(serve.port, "carrier_session_bytes").await;
    let limit = gauge(serve.port, "carrier_session_bytes_limit").await;
    eprintln!(
        "session memory: {} KiB of {} KiB",
        in_use / KIB,
        limit / KIB
    );
    assert_eq!(limit, flags.max_session_bytes);
    assert!(
        in_use <= limit,
        "{in_use} B charged over the {limit} B budget"
    );

    // The least recently used session lost everything: a resume from its start is a gap up to
    // its last event, and its history is empty (its own bounds alone keep its last two turns).
    let (oldest, oldest_last) = last_seqs[0].clone();
    let mut r = Client::connect(&serve.url()).await;
    let resumed = r
        .handshake(json!({"resume": {"session_id": oldest, "epoch": epoch, "after_seq": 0}}))
        .await;
    assert_eq!(resumed["session_id"], oldest.as_str());
    assert_eq!(
        resumed["resume"],
        json!({"outcome": "gap", "from": 1, "to": oldest_last})
    );
    let history = r.ok("session.history", json!({})).await;
    assert!(
        turn_ids(&history).is_empty(),
        "the oldest session's history should have gone first: {:?}",
        turn_ids(&history)
    );

    // The session used last keeps what its own bounds allow: its last two turns, and every
    // event after its first one.
    let (newest, newest_last) = last_seqs[SESSIONS - 1].clone();
    let history = c.ok("session.history", json!({})).await;
    assert_eq!(turn_ids(&history), ["t2", "t2", "t3", "t3"]);
    let mut r2 = Client::connect(&serve.url()).await;
    let resumed = r2
        .handshake(json!({"resume": {
            "session_id": newest, "epoch": epoch, "after_seq": newest_last - 1
        }}))
        .await;
    assert_eq!(
        resumed["resume"],
        json!({"outcome": "resumed", "replayed": 1})
    );

    drop((c, r, r2));
    serve.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_running_turns_of_one_mib_prompts_stay_within_the_figure() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    // Every session runs a turn whose 1 MiB prompt is half a million one-letter words, which
    // the embedded agent streams back one word a minute: each running turn holds its prompt
    // and its reply for as long as it runs.
    const SESSIONS: usize = 64;
    const PROMPT: usize = (1 << 20) - 1024;
    let flags = Flags {
        demo_delay_ms: 60_000,
        ..Flags::defaults()
    };
    let args = flags.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start(&args).await.expect("serve");
    let figure = flags.readme_figure(1, 0);
    let words: String = "a ".repeat(PROMPT / 2);

    let (mut c, _) = serve.client().await;
    for n in 0..SESSIONS {
        if n > 0 {
            c.ok("sessions.start", json!({})).await;
        }
        let turn_id = c.submit(&words).await;
        // The first word of the reply: the agent has made its reply and streams it.
        let first = c.event("session.text_delta").await;
        assert_eq!(first["payload"]["turn_id"], turn_id.as_str());
        c.event("session.turn_started").await;
        let status = c.ok("session.status", json!({})).await;
        assert_eq!(status["state"], "running");
    }

    let peak = peak_rss_kib(serve.pid) * KIB;
    eprintln!(
        "{SESSIONS} running turns: peak resident memory {} MiB; the README's figure for one \
         connection: {} MiB",
        peak / MIB,
        figure / MIB
    );
    assert!(
        peak < figure,
        "peak resident memory {peak} B is over the README's figure {figure} B"
    );
    drop(c);
    serve.finish().await;
}

#[tokio::test]
async fn the_budget_is_at_most_64_gib_and_published_in_the_handshake() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    const MAX: u64 = 64 << 30;
    let serve = Serve::start(&["--max-session-bytes", &MAX.to_string()])
        .await
        .expect("the largest budget is accepted");
    let (_c, hs) = serve.client().await;
    assert_eq!(hs["limits"]["max_session_bytes"], MAX);
    assert_eq!(gauge(serve.port, "carrier_session_bytes_limit").await, MAX);
    assert_eq!(gauge(serve.port, "carrier_session_bytes").await, 0);
    serve.finish().await;

    let Err(refused) = Serve::start(&["--max-session-bytes", &(MAX + 1).to_string()]).await else {
        panic!("a budget past 64 GiB was accepted");
    };
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--max-session-bytes") && refused.stderr.contains("64 GiB"),
        "{}",
        refused.stderr
    );
}
