//! The web console in a real browser: the `carrier serve` binary, headless Debian Chromium
//! driven over the DevTools protocol (see `browser/harness.rs` for why), and a person's
//! path through `/console` — connect, stream a turn, abort one, answer permission prompts, upload
//! a file; several pages on one session (an observer sees every prompt live, Send and Abort follow
//! turns another page started); what a wrong token and a vanished carrier look like — plus the
//! proof that a page from a foreign origin cannot open the socket; and a page that imports
//! `/client.js` and runs a turn through a transport object of its own; and the console served
//! by a carrier mounted under `/agent` of a host's axum server (`examples/axum_mount.rs`).
//!
//! A missing browser is installed on first use where the tests may (root or passwordless sudo,
//! `.ci/install-browser.sh`); elsewhere these tests fail, never skip. Every wait is bounded by
//! [`harness::WAIT`] and fails with the page's text, console and both processes' logs.
//! Screenshots of each state land in `target/console-*.png`.

mod harness;

use crate::axum_mount;

use std::path::{Path, PathBuf};

use carrier::server::{Binary, ChannelDescriptor};
use harness::{Carrier, Chromium, ForeignSite, Page};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_drives_a_session_and_uploads_a_file_in_chromium() {
    let inbox = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(inbox.path()).await;
    let browser = Chromium::launch(&[]).await;
    let page = browser.new_page().await;
    page.add_log("carrier serve stderr", carrier.stderr.clone());

    page.navigate(&format!(
        "{}/console#token={}",
        carrier.http(),
        carrier.token
    ))
    .await;
    let connected = page
        .wait_for(
            "the console to connect",
            "['connected', 'version_skew'].includes(document.body.dataset.state) && \
             ({state: document.body.dataset.state, role: document.body.dataset.role, \
               hash: location.hash})",
        )
        .await;
    assert_eq!(connected["state"], "connected", "{connected}");
    assert_eq!(connected["role"], "drive", "{connected}");
    assert_eq!(
        connected["hash"], "",
        "the token must leave the address bar"
    );
    page.eval(RECORD_REPLY_SNAPSHOTS).await.unwrap();

    a_prompt_streams_its_echo_word_by_word(&page).await;
    a_running_turn_can_be_aborted(&page).await;
    a_tool_runs_only_when_allowed(&page).await;
    a_file_is_uploaded_on_the_files_channel(&page, inbox.path()).await;

    let layout = page
        .eval(
            "({ page: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth })",
        )
        .await
        .unwrap();
    assert!(
        layout["page"].as_u64() <= layout["viewport"].as_u64(),
        "nothing on the console overflows sideways: {layout}"
    );
    let errors = page.page_errors();
    assert!(errors.is_empty(), "the console logged errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_on_one_session_see_every_prompt_and_follow_its_turns() {
    let inbox = tempfile::tempdir().unwrap();
    let mut carrier = Carrier::start(inbox.path()).await;
    let browser = Chromium::launch(&[]).await;
    let console = format!("{}/console#token={}", carrier.http(), carrier.token);
    let first = browser.new_page().await;
    let second = browser.new_page().await;
    let observer = browser.new_page().await;
    for page in [&first, &second, &observer] {
        page.add_log("carrier serve stderr", carrier.stderr.clone());
    }
    first.navigate(&console).await;
    second.navigate(&console).await;
    observer.navigate(&format!("{console}&role=observe")).await;
    for (page, role) in [
        (&first, "drive"),
        (&second, "drive"),
        (&observer, "observe"),
    ] {
        let seen = page
            .wait_for(
                &format!("the {role} page to connect"),
                "document.body.dataset.state === 'connected' && document.body.dataset.role",
            )
            .await;
        assert_eq!(seen, role);
        // Cleared by a reload: proves below that what a page shows arrived live.
        page.eval("window.loadedOnce = true").await.unwrap();
        page.eval(RECORD_SEND_STATES).await.unwrap();
    }
    let hint = observer
        .eval("({ send: document.getElementById('send').disabled, hint: document.getElementById('prompt-hint').textContent })")
        .await
        .unwrap();
    assert_eq!(hint["send"], true, "{hint}");
    assert!(
        hint["hint"]
            .as_str()
            .unwrap()
            .contains("without &role=observe"),
        "the observer is told how to drive: {hint}"
    );

    // A long turn (1,000 words, 30 ms apart: 30 s, however slow the machine) started by the
    // first page.
    let prompt = (1..=1000)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    first.type_into("#prompt", &prompt).await;
    first.press_enter().await;
    let running = format!(
        "(() => {{ const turn = [...document.querySelectorAll('#output .turn')] \
           .find((t) => t.querySelector('.prompt').textContent === {}); \
         return turn?.dataset.status === 'running' && document.body.dataset.turn === 'running' \
           && window.loadedOnce === true \
           ? {{ send: document.getElementById('send').disabled, \
                abort: document.getElementById('abort').disabled, \
                reply: turn.querySelector('.reply').textContent }} : null; }})()",
        js(&prompt)
    );
    // The observer shows the prompt while the turn runs, without a reload.
    let seen = observer
        .wait_for(
            "the observer to show the first page's prompt live",
            &running,
        )
        .await;
    assert_eq!(seen["send"], true, "an observer never sends: {seen}");
    save_screenshot(&observer, "console-observer-live.png").await;
    // Both drive pages: Send disabled while the turn runs, Abort enabled — also on the page
    // that did not start it.
    for (page, name) in [(&first, "first"), (&second, "second")] {
        let seen = page
            .wait_for(
                &format!("the {name} page to follow the running turn"),
                &format!("(() => {{ const s = {running}; return s && s.send === true && s.abort === false ? s : null; }})()"),
            )
            .await;
        assert_eq!(seen["send"], true, "{name}: {seen}");
    }
    save_screenshot(&first, "console-send-disabled-mid-turn.png").await;

    // The second page aborts the turn the first one started; every drive page can send again.
    second.click("#abort").await;
    let idle = "(() => ['aborted', 'completed'].includes(document.body.dataset.turn) \
        && !document.getElementById('send').disabled && document.getElementById('abort').disabled \
        && document.body.dataset.turn)()";
    for (page, name) in [(&first, "first"), (&second, "second")] {
        let turn = page
            .wait_for(&format!("Send to come back on the {name} page"), idle)
            .await;
        assert_eq!(turn, "aborted", "{name}");
    }

    // A turn that completes: Send was disabled while it ran and is enabled after it.
    let short = "a short turn that completes";
    second.type_into("#prompt", short).await;
    second.press_enter().await;
    for (page, name) in [(&first, "first"), (&second, "second")] {
        let turn = wait_turn_completed(page, short).await;
        assert_eq!(turn["text"], format!("echo: {short}"), "{name}: {turn}");
        let states = page.eval("window.sendStates").await.unwrap();
        let states: Vec<&str> = states
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let last_run = states
            .iter()
            .rposition(|s| *s == "disabled/running")
            .unwrap_or_else(|| {
                panic!("{name}: Send was never disabled while a turn ran: {states:?}")
            });
        assert!(
            states[last_run..].contains(&"enabled/completed"),
            "{name}: Send enabled after the turn: {states:?}"
        );
    }
    save_screenshot(&second, "console-send-enabled-after-turn.png").await;
    // The observer saw the second page's prompt too, and the first page (which did not send
    // it) shows it as well.
    wait_turn_completed(&observer, short).await;

    // A page with a wrong token is told what to do, and doing it works.
    let wrong = browser.new_page().await;
    wrong.add_log("carrier serve stderr", carrier.stderr.clone());
    wrong
        .navigate(&format!("{}/console#token=not-the-token", carrier.http()))
        .await;
    let notice = wrong
        .wait_for(
            "the wrong-token message",
            "document.body.dataset.state === 'disconnected' && !document.getElementById('notice').hidden \
             && !document.getElementById('token-form').hidden \
             && document.getElementById('notice-text').textContent",
        )
        .await;
    let notice = notice.as_str().unwrap();
    assert!(
        notice.starts_with(
            "The token was not accepted: paste the token that \"carrier serve\" printed when it started"
        ),
        "{notice}"
    );
    assert!(
        !notice.contains("1008"),
        "no close codes for people: {notice}"
    );
    save_screenshot(&wrong, "console-wrong-token.png").await;
    wrong.type_into("#token-input", &carrier.token).await;
    wrong.click("#connect").await;
    wrong
        .wait_for(
            "the pasted token to connect",
            "document.body.dataset.state === 'connected' && document.getElementById('notice').hidden",
        )
        .await;

    // The carrier vanishes: the pages say they are reconnecting, and what to do if it stopped.
    carrier.kill().await;
    let notice = observer
        .wait_for(
            "the reconnecting message",
            "document.body.dataset.state === 'connecting' && !document.getElementById('notice').hidden \
             && document.getElementById('notice-text').textContent",
        )
        .await;
    assert!(
        notice.as_str().unwrap().contains("reconnecting")
            && notice.as_str().unwrap().contains("carrier serve"),
        "{notice}"
    );
    save_screenshot(&observer, "console-reconnecting.png").await;
    for page in [&first, &second, &observer, &wrong] {
        let errors = page.page_errors();
        assert!(errors.is_empty(), "the console logged errors: {errors:#?}");
    }
}

async fn a_prompt_streams_its_echo_word_by_word(page: &Page) {
    let prompt = "carrier streams this reply one word at a time so that a person watching the \
                  console sees it grow while the turn is still running and only then complete; \
                  the words arrive as separate deltas a few milliseconds apart and the page \
                  appends each one to the same reply until the turn is done";
    let expected = format!("echo: {prompt}");
    page.type_into("#prompt", prompt).await;
    page.press_enter().await;

    // Seen from outside while it streams, for the screenshot. The proof of streaming is the
    // page's own record below, which does not depend on how fast this test polls.
    let seen = page
        .wait_for(
            "the reply to start streaming",
            &format!(
                "(() => {{ const turn = [...document.querySelectorAll('#output .turn')].at(-1); \
                 const text = turn?.querySelector('.reply').textContent ?? ''; \
                 return text && {{ text, midTurn: text !== {} \
                   && turn.dataset.status === 'running' && document.body.dataset.turn === 'running' }}; }})()",
                js(&expected)
            ),
        )
        .await;
    if seen["midTurn"] == true {
        save_screenshot(page, "console-mid-turn.png").await;
    } else {
        eprintln!("note: the turn ended before it could be photographed mid-turn: {seen}");
    }

    let turn = wait_turn_completed(page, prompt).await;
    assert_eq!(turn["text"], expected.as_str(), "{turn}");
    assert_eq!(turn["pageTurn"], "completed", "{turn}");
    let snapshots = page
        .eval(&format!("window.replySnapshots[{}]", turn["id"]))
        .await
        .unwrap();
    let texts: Vec<&str> = snapshots
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert!(texts.len() >= 3, "the reply did not stream: {snapshots}");
    assert_eq!(texts.last(), Some(&expected.as_str()), "{snapshots}");
    for pair in texts.windows(2) {
        assert!(
            pair[1].starts_with(pair[0]) && pair[1].len() > pair[0].len(),
            "the reply only grows: {snapshots}"
        );
    }
    for partial in &texts[..texts.len() - 1] {
        assert!(
            expected[partial.len()..].starts_with(' '),
            "deltas end at word boundaries: {partial:?}"
        );
    }
}

async fn a_running_turn_can_be_aborted(page: &Page) {
    // 300 words at 30 ms each: the turn would run for 9 s, so the click lands mid-turn even on
    // a slow machine.
    let prompt = (1..=300)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let prompt = prompt.as_str();
    let expected = format!("echo: {prompt}");
    page.type_into("#prompt", prompt).await;
    page.press_enter().await;
    page.wait_for(
        "the turn to start streaming",
        "document.querySelector('#output .turn[data-status=\"running\"] .reply')?.textContent",
    )
    .await;
    page.click("#abort").await;
    let turn = page
        .wait_for(
            "the turn to end aborted",
            &format!(
                "(() => {{ const turn = [...document.querySelectorAll('#output .turn')] \
                   .find((t) => t.querySelector('.prompt').textContent === {}); \
                 return turn?.dataset.status === 'aborted' && document.body.dataset.turn === 'aborted' \
                   ? {{ text: turn.querySelector('.reply').textContent }} : null; }})()",
                js(prompt)
            ),
        )
        .await;
    let text = turn["text"].as_str().unwrap();
    assert!(
        expected.starts_with(text) && text.len() < expected.len(),
        "an aborted turn keeps only what streamed: {text:?}"
    );
}

async fn a_tool_runs_only_when_allowed(page: &Page) {
    for (prompt, button, reply, note) in [
        (
            "/tool list the inbox",
            "#allow",
            "tool ran: list the inbox",
            "permission allowed",
        ),
        (
            "/tool empty the inbox",
            "#deny",
            "tool denied",
            "permission denied",
        ),
    ] {
        page.type_into("#prompt", prompt).await;
        page.press_enter().await;
        let request = page
            .wait_for(
                &format!("the permission prompt for {prompt:?}"),
                "(() => { const box = document.getElementById('permission'); \
                 return !box.hidden && box.dataset.requestId \
                   && document.body.dataset.turn === 'awaiting_permission' \
                   ? { tool: document.getElementById('permission-tool').textContent, \
                       input: JSON.parse(document.getElementById('permission-input').textContent), \
                       reply: document.querySelector('#output .turn[data-status=\"awaiting_permission\"] .reply')?.textContent, \
                       session: document.getElementById('sessions').selectedOptions[0]?.text } \
                   : null; })()",
            )
            .await;
        let command = prompt.strip_prefix("/tool ").unwrap();
        assert_eq!(request["tool"], "demo.tool", "{request}");
        assert_eq!(request["input"], json!({ "command": command }), "{request}");
        assert_eq!(request["reply"], "", "nothing runs before the decision");
        let session = request["session"].as_str().unwrap_or_default();
        assert!(
            session.contains("(awaiting_permission)"),
            "the session list shows the current session's state: {request}"
        );

        page.click(button).await;
        let turn = wait_turn_completed(page, prompt).await;
        assert_eq!(turn["text"], reply, "{turn}");
        assert!(turn["meta"].as_str().unwrap().contains(note), "{turn}");
        let hidden = page
            .eval("document.getElementById('permission').hidden")
            .await;
        assert_eq!(
            hidden,
            Ok(json!(true)),
            "the prompt closes after the answer"
        );
        let session = page
            .eval("document.getElementById('sessions').selectedOptions[0]?.text")
            .await;
        assert!(
            matches!(&session, Ok(Value::String(s)) if s.contains("(idle)")),
            "{session:?}"
        );
    }
}

async fn a_file_is_uploaded_on_the_files_channel(page: &Page, inbox: &Path) {
    // Three full 64 KiB chunks and a partial one, with every byte value.
    let bytes: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let outbox = tempfile::tempdir().unwrap();
    let source = outbox.path().join("notes 2024.bin");
    std::fs::write(&source, &bytes).unwrap();
    let sha256 = hex::encode(Sha256::digest(&bytes));

    page.wait_for(
        "the upload channel to be selected",
        "document.getElementById('channel-select').value === 'upload'",
    )
    .await;
    page.set_file_input("#file-input", &source).await;
    page.click("#send-file").await;
    let status = page
        .wait_for(
            "the upload's outcome",
            "(() => { const s = document.getElementById('file-status'); \
             return ['saved', 'error'].includes(s.dataset.status) \
               ? { status: s.dataset.status, text: s.textContent } : null; })()",
        )
        .await;
    assert_eq!(status["status"], "saved", "{status}");
    assert!(
        status["text"].as_str().unwrap().contains(&sha256),
        "{status}"
    );

    let saved = std::fs::read(inbox.join("notes 2024.bin")).expect("the uploaded file");
    assert!(saved == bytes, "the saved file differs from the one sent");
    let entries: Vec<_> = std::fs::read_dir(inbox).unwrap().collect();
    assert_eq!(
        entries.len(),
        1,
        "nothing but the file is left: {entries:?}"
    );

    // The same name again is refused by the channel, and the console says so.
    page.click("#send-file").await;
    let refused = page
        .wait_for(
            "the second upload to be refused",
            "document.getElementById('file-status').dataset.status === 'error' \
             && document.getElementById('file-status').textContent",
        )
        .await;
    assert!(refused.as_str().unwrap().contains("exists"), "{refused}");
    assert!(std::fs::read(inbox.join("notes 2024.bin")).unwrap() == bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_js_runs_a_turn_over_a_custom_transport_in_chromium() {
    let inbox = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(inbox.path()).await;
    let browser = Chromium::launch(&[]).await;
    let page = browser.new_page().await;
    page.add_log("carrier serve stderr", carrier.stderr.clone());
    // Any page of the carrier's origin will do: the script imports /client.js from it.
    page.navigate(&format!("{}/healthz", carrier.http())).await;
    page.eval(&format!(
        "window.outcome = null; ({CUSTOM_TRANSPORT_TURN})({}, {}, {}).then( \
           (r) => (window.outcome = r), (e) => (window.outcome = {{ error: String(e && e.stack || e) }}))",
        js(&format!("ws://127.0.0.1:{}/", carrier.port)),
        js(&carrier.token),
        js(CUSTOM_PROMPT),
    ))
    .await
    .unwrap();
    let outcome = page
        .wait_for("the turn over the custom transport", "window.outcome")
        .await;
    assert!(outcome.get("error").is_none(), "{outcome}");
    assert_eq!(outcome["isWsTransport"], false, "{outcome}");
    assert_eq!(outcome["sameTransport"], true, "{outcome}");
    assert_eq!(outcome["state"], "connected", "{outcome}");
    let expected = format!("echo: {CUSTOM_PROMPT}");
    assert_eq!(outcome["deltas"], expected.as_str(), "{outcome}");
    assert_eq!(outcome["completed"]["text"], expected.as_str(), "{outcome}");
    assert_eq!(outcome["started"]["prompt"], CUSTOM_PROMPT, "{outcome}");
    // Every frame went through the page's own transport, the handshake first.
    let log: Vec<String> = outcome["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        log.first().map(String::as_str),
        Some("out system.handshake"),
        "{log:?}"
    );
    assert!(log.contains(&"out session.submit".to_owned()), "{log:?}");
    assert!(
        log.iter().filter(|l| *l == "in session.text_delta").count() >= 4,
        "{log:?}"
    );
    let errors = page.page_errors();
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
}

const CUSTOM_PROMPT: &str = "a turn over a transport the page wrote itself";

/// A page script: a transport object written only against the Transport contract, over the
/// browser's own WebSocket (no WsTransport), under a CarrierClient imported from /client.js,
/// driving one prompt turn. Resolves with what it saw.
const CUSTOM_TRANSPORT_TURN: &str = r#"async (url, token, prompt) => {
  const { CarrierClient, WsTransport } = await import("/client.js");
  const log = [];
  const messageHandlers = new Set();
  const stateHandlers = new Set();
  let socket = null;
  const transport = {
    state: "disconnected",
    lastClose: null,
    setState(next) {
      const previous = transport.state;
      if (previous === next) return;
      transport.state = next;
      for (const handler of [...stateHandlers]) handler(next, previous);
    },
    connect() {
      return new Promise((resolve, reject) => {
        transport.setState("connecting");
        socket = new WebSocket(url, [token]);
        socket.binaryType = "arraybuffer";
        socket.onopen = () => { transport.setState("connected"); resolve(); };
        socket.onmessage = (e) => {
          let frame;
          if (typeof e.data === "string") {
            try { frame = JSON.parse(e.data); } catch { return; }
            log.push(`in ${frame.event ?? "response"}`);
          } else {
            frame = new Uint8Array(e.data);
            log.push("in binary");
          }
          for (const handler of [...messageHandlers]) handler(frame);
        };
        socket.onclose = (e) => {
          transport.lastClose = { code: e.code, reason: e.reason };
          transport.setState("disconnected");
          reject(new Error(`closed ${e.code}`));
        };
      });
    },
    disconnect() { socket?.close(1000); transport.setState("disconnected"); return Promise.resolve(); },
    send(frame) {
      if (transport.state !== "connected") throw new Error("not connected");
      const binary = frame instanceof Uint8Array;
      log.push(`out ${binary ? "binary" : frame.method ?? "response"}`);
      socket.send(binary ? frame : JSON.stringify(frame));
    },
    onMessage(handler) { messageHandlers.add(handler); return { dispose: () => messageHandlers.delete(handler) }; },
    onStateChange(handler) { stateHandlers.add(handler); return { dispose: () => stateHandlers.delete(handler) }; },
  };
  const client = new CarrierClient(transport, { clientName: "custom-transport-page" });
  const events = [];
  client.onEvent((frame) => events.push(frame));
  await client.connect();
  const { turn_id } = await client.request("session.submit", { prompt });
  await new Promise((resolve, reject) => {
    const check = setInterval(() => {
      if (events.some((e) => e.event === "session.turn_completed" && e.payload.turn_id === turn_id)) {
        clearInterval(check);
        resolve();
      }
    }, 20);
    setTimeout(() => { clearInterval(check); reject(new Error("no turn_completed within 15 s")); }, 15000);
  });
  const ofTurn = events.filter((e) => e.payload?.turn_id === turn_id);
  const outcome = {
    isWsTransport: transport instanceof WsTransport,
    sameTransport: client.transport === transport,
    state: client.state,
    started: ofTurn.find((e) => e.event === "session.turn_started")?.payload,
    deltas: ofTurn.filter((e) => e.event === "session.text_delta").map((e) => e.payload.delta).join(""),
    completed: ofTurn.find((e) => e.event === "session.turn_completed")?.payload,
    log,
  };
  await client.disconnect();
  return outcome;
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_from_a_foreign_origin_cannot_open_the_socket() {
    let inbox = tempfile::tempdir().unwrap();
    let carrier = Carrier::start(inbox.path()).await;
    // The foreign page knows the token: only its Origin stands between it and the session.
    let site = ForeignSite::serve(foreign_page(carrier.port, &carrier.token)).await;
    let browser = Chromium::launch(&["--host-resolver-rules=MAP evil.test 127.0.0.1"]).await;
    let page = browser.new_page().await;
    page.add_log("carrier serve stderr", carrier.stderr.clone());

    // Control: the same page from another loopback port is a loopback origin, which is admitted.
    page.navigate(&format!("http://127.0.0.1:{}/", site.port))
        .await;
    let outcome = socket_outcome(&page).await;
    assert_eq!(outcome["outcome"], "open", "{outcome}");

    let evil = format!("http://evil.test:{}", site.port);
    page.navigate(&format!("{evil}/")).await;
    let origin = page.eval("location.origin").await;
    assert_eq!(origin, Ok(json!(evil)));
    let outcome = socket_outcome(&page).await;
    assert_eq!(outcome["outcome"], "closed:1006", "{outcome}");
    assert_eq!(outcome["error"], "yes", "{outcome}");
    // The browser sent the foreign Origin, the carrier answered 403 and never switched protocols.
    let request = page
        .wait_for_event(
            "the browser's record of the WebSocket handshake",
            "Network.webSocketWillSendHandshakeRequest",
            |e| e["request"]["headers"]["Origin"] == evil.as_str(),
        )
        .await;
    page.wait_for_event(
        "the browser to log the refused handshake",
        "Log.entryAdded",
        |e| {
            e["entry"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with(&evil))
                && e["entry"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Unexpected response code: 403"))
        },
    )
    .await;
    let switched = page.events("Network.webSocketHandshakeResponseReceived");
    assert!(
        !switched
            .iter()
            .any(|r| r["requestId"] == request["requestId"]),
        "the foreign page's handshake got a response: {switched:?}"
    );
    let server_log = std::fs::read_to_string(&carrier.stderr).unwrap();
    assert!(
        server_log
            .lines()
            .any(|l| l.contains("upgrade refused") && l.contains("Origin")),
        "the carrier logs why it refused:\n{server_log}"
    );

    // DNS rebinding: the console itself under a foreign Host name is refused with 403.
    page.navigate(&format!("http://evil.test:{}/console", carrier.port))
        .await;
    let refused = page
        .eval("({text: document.body.innerText, console: !!document.getElementById('output')})")
        .await
        .unwrap();
    assert!(
        refused["text"].as_str().unwrap().contains("forbidden"),
        "{refused}"
    );
    assert_eq!(refused["console"], false, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_works_under_the_path_a_host_mounted_the_carrier_at() {
    // The example's carrier and router, served by axum in this process, with a channel only
    // the host sends on.
    let transport = axum_mount::carrier().expect("the example's carrier starts");
    transport
        .register_channel(
            ChannelDescriptor::new("diagnostics", &["report"], Binary::Accepted).host_to_clients(),
        )
        .expect("registered");
    let token = transport.resolved_token().unwrap().to_owned();
    let (port, server) = axum_mount::serve(&transport, std::future::pending())
        .await
        .expect("the host's server binds");
    let browser = Chromium::launch(&[]).await;
    let page = browser.new_page().await;

    page.navigate(&format!(
        "http://127.0.0.1:{port}/agent/console#token={token}"
    ))
    .await;
    let connected = page
        .wait_for(
            "the mounted console to connect",
            "['connected', 'version_skew'].includes(document.body.dataset.state) && \
             ({state: document.body.dataset.state, role: document.body.dataset.role})",
        )
        .await;
    assert_eq!(connected["state"], "connected", "{connected}");
    // It loaded its module beside itself and dialled the socket at the mount path.
    let sockets: Vec<String> = page
        .events("Network.webSocketCreated")
        .iter()
        .filter_map(|e| e["url"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        sockets,
        [format!("ws://127.0.0.1:{port}/agent/")],
        "the console dials the directory it was served from"
    );
    // The page's own record of what it fetched (Resource Timing): its modules.
    let scripts: Vec<String> = page
        .eval(
            "performance.getEntriesByType('resource').map((e) => e.name)\
               .filter((url) => url.endsWith('.js'))",
        )
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|url| url.as_str().map(str::to_owned))
        .collect();
    assert!(
        scripts.contains(&format!("http://127.0.0.1:{port}/agent/client.js")),
        "{scripts:?}"
    );
    assert!(
        scripts
            .iter()
            .all(|url| url.starts_with(&format!("http://127.0.0.1:{port}/agent/"))),
        "every module comes from under the mount: {scripts:?}"
    );

    a_tool_runs_only_when_allowed(&page).await;
    the_console_offers_no_send_on_a_channel_only_the_host_sends_on(&page).await;
    let errors = page.page_errors();
    assert!(errors.is_empty(), "the console logged errors: {errors:#?}");
    server.abort();
    transport.stop().await;
}

/// `diagnostics` is host → clients only: selected, its event and file sends are disabled and
/// the console says why; `echo`, which takes frames both ways, offers both.
async fn the_console_offers_no_send_on_a_channel_only_the_host_sends_on(page: &Page) {
    let pick = |name: &str| {
        format!(
            "(() => {{ const s = document.getElementById('channel-select'); s.value = '{name}'; \
             s.dispatchEvent(new Event('change')); return s.value; }})()"
        )
    };
    let state = "({ event: document.getElementById('send-event').disabled, \
                    file: document.getElementById('send-file').disabled, \
                    info: document.getElementById('channel-info').textContent })";
    page.wait_for(
        "the diagnostics channel to be listed",
        "[...document.getElementById('channel-select').options].some((o) => o.value === 'diagnostics')",
    )
    .await;
    assert_eq!(
        page.eval(&pick("diagnostics")).await.unwrap(),
        "diagnostics"
    );
    let host_only = page.eval(state).await.unwrap();
    assert_eq!(host_only["event"], true, "{host_only}");
    assert_eq!(host_only["file"], true, "{host_only}");
    assert!(
        host_only["info"]
            .as_str()
            .unwrap()
            .contains("from the host only"),
        "{host_only}"
    );
    assert_eq!(page.eval(&pick("echo")).await.unwrap(), "echo");
    let both_ways = page.eval(state).await.unwrap();
    assert_eq!(both_ways["event"], false, "{both_ways}");
    assert_eq!(both_ways["file"], false, "{both_ways}");
}

/// Waits for the foreign page's socket to open or close.
async fn socket_outcome(page: &Page) -> Value {
    page.wait_for(
        "the page's WebSocket to open or close",
        "document.body.dataset.outcome !== 'pending' && \
         { outcome: document.body.dataset.outcome, error: document.body.dataset.error ?? 'no' }",
    )
    .await
}

/// Waits until the turn started by `prompt` has completed; returns its id, reply and notes.
async fn wait_turn_completed(page: &Page, prompt: &str) -> Value {
    page.wait_for(
        &format!("the turn for {prompt:?} to complete"),
        &format!(
            "(() => {{ const turn = [...document.querySelectorAll('#output .turn[data-turn-id]')] \
               .find((t) => t.querySelector('.prompt').textContent === {}); \
             return turn?.dataset.status === 'completed' \
               && document.getElementById('turn-status').dataset.turnId === turn.dataset.turnId \
               ? {{ id: turn.dataset.turnId, text: turn.querySelector('.reply').textContent, \
                    meta: turn.querySelector('.meta').textContent, \
                    pageTurn: document.body.dataset.turn }} \
               : null; }})()",
            js(prompt)
        ),
    )
    .await
}

/// Records, per turn id, every distinct text its reply shows (a MutationObserver sees each
/// delta however fast the page paints), so the test can prove the reply streamed.
const RECORD_REPLY_SNAPSHOTS: &str = "(() => {
  window.replySnapshots = {};
  const output = document.getElementById('output');
  const record = () => {
    for (const turn of output.querySelectorAll('.turn[data-turn-id]')) {
      const text = turn.querySelector('.reply').textContent;
      const seen = (window.replySnapshots[turn.dataset.turnId] ??= []);
      if (text !== (seen.at(-1)?.text ?? '')) seen.push({ text, status: turn.dataset.status });
    }
  };
  new MutationObserver(record).observe(output, { subtree: true, childList: true, characterData: true, attributes: true });
  return true;
})()";

/// Records every change of the Send button or the page's turn state as `enabled|disabled/TURN`,
/// so a test can prove Send was disabled during a turn however briefly it ran.
const RECORD_SEND_STATES: &str = "(() => {
  window.sendStates = [];
  const send = document.getElementById('send');
  const record = () => {
    const state = `${send.disabled ? 'disabled' : 'enabled'}/${document.body.dataset.turn}`;
    if (window.sendStates.at(-1) !== state) window.sendStates.push(state);
  };
  record();
  const watch = new MutationObserver(record);
  watch.observe(send, { attributes: true, attributeFilter: ['disabled'] });
  watch.observe(document.body, { attributes: true, attributeFilter: ['data-turn'] });
  return true;
})()";

/// A page that tries to open the carrier's socket with the right token, and shows what happened.
fn foreign_page(carrier_port: u16, token: &str) -> String {
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>not the console</title></head>
<body data-outcome="pending"><pre id="log"></pre>
<script>
  const log = (line) => (document.getElementById("log").textContent += line + "\n");
  const ws = new WebSocket("ws://127.0.0.1:{carrier_port}/", [{token}]);
  ws.onopen = () => {{ document.body.dataset.outcome = "open"; log("open"); ws.close(1000); }};
  ws.onerror = () => {{ document.body.dataset.error = "yes"; log("error"); }};
  ws.onclose = (e) => {{
    log("close " + e.code);
    if (document.body.dataset.outcome !== "open") document.body.dataset.outcome = "closed:" + e.code;
  }};
</script></body></html>"#,
        token = js(token)
    )
}

/// A JavaScript string literal.
fn js(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

async fn save_screenshot(page: &Page, name: &str) {
    // A background tab may not paint: show this one first, scrolled so the notice at the top or
    // the Send and Abort buttons below the output are in view.
    let _ = page.call("Page.bringToFront", json!({})).await;
    let _ = page
        .eval(
            "(document.getElementById('notice').hidden \
               ? document.getElementById('prompt-form') : document.body) \
             .scrollIntoView({ block: document.getElementById('notice').hidden ? 'end' : 'start' })",
        )
        .await;
    let png = page.screenshot().await;
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| carrier_test_support::repo().join("target"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
}
