//! One figure for the whole process, ACP included (README.md, "Memory bounds"): ACP clients
//! that hold everything `/acp` lets one connection hold — every session the host allows bound,
//! a prompt running in each (ids at the 256-byte bound), every permission request left
//! unanswered — while they send oversized messages, batches, garbage and unknown methods,
//! keep a real `carrier serve` under the figure computed from its flags, and it still answers.
//!
//! A real `carrier serve` child, `tokio-tungstenite` clients over 127.0.0.1 that read
//! everything they are sent, and the child's peak resident memory (`VmHWM`).

use carrier_test_support as support;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::acp::AcpClient;
use support::figure::Flags;
use support::serve_process::{peak_rss_kib, Serve, TOKEN};
use tokio_tungstenite::tungstenite::Message;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Hostile connections.
const CONNECTIONS: usize = 8;

/// A request id at the bound carrier keeps (256 bytes of JSON, quotes included).
fn long_id(n: usize) -> String {
    let head = format!("{n}-");
    format!("{head}{}", "i".repeat(254 - head.len()))
}

/// One hostile ACP client: binds as many sessions as the host lets it start, runs a prompt
/// that asks a permission in each, never answers, then floods. Returns the sessions it bound.
async fn hostile(url: String, n: usize) -> usize {
    let (mut c, _) = AcpClient::initialized(&url).await;
    let mut sessions = Vec::new();
    while sessions.len() < 16 {
        let r = c
            .call("session/new", json!({"cwd": "/", "mcpServers": []}))
            .await;
        match r["result"]["sessionId"].as_str() {
            Some(id) => sessions.push(id.to_owned()),
            None => break,
        }
    }
    for (i, session) in sessions.iter().enumerate() {
        let id = long_id(n * 100 + i);
        c.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "/tool held"}]}}),
        )
        .await;
        c.wait_method("session/request_permission").await;
    }
    // The flood, read as it is answered.
    let (mut write, mut read) = c.ws.split();
    let reader = tokio::spawn(async move {
        let mut answers = 0usize;
        while let Some(Ok(message)) = read.next().await {
            if let Message::Text(_) = message {
                answers += 1;
            }
        }
        answers
    });
    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"x","params":{{"p":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    for k in 0..400usize {
        let text = match k % 8 {
            0 if k < 80 => oversized.clone(),
            1 => "not json at all".to_owned(),
            2 => format!("[{}]", r#"{"jsonrpc":"2.0","id":1,"method":"initialize"},"#.repeat(50) + "1"),
            3 => json!({"jsonrpc": "2.0", "id": long_id(k), "method": "no/such/method", "params": {}}).to_string(),
            4 => json!({"jsonrpc": "2.0", "id": long_id(k), "method": "session/prompt",
                "params": {"sessionId": "nope", "prompt": []}}).to_string(),
            5 => json!({"jsonrpc": "2.0", "id": k, "result": {"outcome": {"outcome": "cancelled"}}}).to_string(),
            6 => json!({"jsonrpc": "2.0", "id": long_id(k), "method": "session/load",
                "params": {"sessionId": "s1", "cwd": "/", "mcpServers": []}}).to_string(),
            _ => json!({"jsonrpc": "2.0", "id": long_id(k), "method": "initialize",
                "params": {"protocolVersion": 1}}).to_string(),
        };
        write
            .send(Message::text(text))
            .await
            .expect("the carrier keeps reading");
    }
    write.send(Message::Close(None)).await.ok();
    let answers = tokio::time::timeout(support::WAIT * 6, reader)
        .await
        .expect("the answers in time")
        .expect("the reader");
    assert!(
        answers >= 400 - 50,
        "connection {n}: {answers} answers to 400 messages"
    );
    sessions.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_acp_clients_at_every_bound_stay_within_the_figure() {
    let flags = Flags::defaults();
    let args = flags.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start(&args).await.expect("serve");
    let figure = flags.readme_figure(CONNECTIONS as u64 + 1, 0);
    let url = format!("ws://127.0.0.1:{}/acp?token={TOKEN}", serve.port);

    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|n| tokio::spawn(hostile(url.clone(), n)))
        .collect();
    let mut bound = 0;
    for client in clients {
        bound += client.await.expect("a hostile client");
    }
    // The host's 64 sessions, less the default one, are all someone's.
    assert_eq!(bound, 63);

    // It still answers, and every bad message was counted.
    let (mut probe, init) = AcpClient::initialized(&url).await;
    assert_eq!(init["protocolVersion"], 1);
    let replayed = probe.load_session("s1").await;
    assert!(replayed.is_empty());
    // Per connection: 10 oversized, 50 not JSON, 50 batches, 50 unknown methods; each once.
    let errors = support::serve_process::gauge(serve.port, "carrier_protocol_errors_total").await;
    assert_eq!(
        errors,
        (CONNECTIONS * 160) as u64,
        "protocol errors counted"
    );

    let peak = peak_rss_kib(serve.pid) * KIB;
    eprintln!(
        "peak resident memory: {} MiB; the README's figure for {} connections: {} MiB",
        peak / MIB,
        CONNECTIONS + 1,
        figure / MIB
    );
    assert!(
        peak < figure,
        "peak resident memory {peak} B is over the README's figure {figure} B"
    );
    serve.finish().await;
}
