//! The Rust client ([`carrier::client::Client`] over [`WsClientTransport`]) against the real
//! carrier (`WsTransport` + the embedded agent), started in-process on 127.0.0.1 (docs/protocol.md,
//! "Handshake", "Sessions and resume", "Client behaviour"): it survives a server restart
//! (reconnects, reports `reset`), a connection dropped mid-turn (reconnects, resumes, no event lost
//! or duplicated), and talks to a server with a newer minor protocol (state `version_skew`) but
//! stops for good at an incompatible one.
//!
//! Reconnects follow the real backoff (first delay 1 s), so these tests take a few seconds.
//! Every wait is bounded and waits for a condition; the only fixed-length waits check that
//! something does *not* happen (no redial after `version_incompatible`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use carrier::client::{
    Client, ClientError, ClientEvent, ConnectionState, ErrorCode, ReceivedSessionEvent,
    ReceivedSessionEventKind, ResumeOutcome, Transport, WsClientTransport, WsOptions,
};
use carrier::protocol::version::VersionPair;
use carrier::server::{Auth, CarrierConfig, WsTransport};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

const TOKEN: &str = "client-real-server-token";

/// The longest any single wait may take: a reconnect needs the 1 s backoff (3 s when the first
/// attempt finds nothing listening yet), plus slack for a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// The carrier
// ---------------------------------------------------------------------------------------------

/// A started carrier on `port` (0: any free port) with exactly that port: no port retry, so a
/// restart on the same port fails loudly instead of moving elsewhere.
async fn carrier(port: u16, profile: AgentProfile) -> WsTransport {
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(port)
            .with_max_retries(0)
            .with_auth(Auth::Token(TOKEN.into())),
    )
    .expect("a valid config");
    transport.attach(profile);
    transport.start().await.expect("the carrier starts");
    if port != 0 {
        assert_eq!(
            transport.bound_port(),
            Some(port),
            "restarted on the same port"
        );
    }
    transport
}

/// The embedded agent, one delta every `delay`.
fn embedded(delay: Duration) -> AgentProfile {
    AgentProfile::embedded(EmbeddedAgent::default().with_demo_delay(delay))
}

/// The embedded agent on a carrier that announces `version` / `min` instead of 1.0 / 1.0.
fn announcing(version: &str, min: &str) -> AgentProfile {
    let pair = VersionPair::parse(version, min).expect("a consistent version pair");
    let agent = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(1));
    AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
        .protocol_version(pair)
        .build()
}

fn port_of(transport: &WsTransport) -> u16 {
    transport.bound_port().expect("the carrier is running")
}

// ---------------------------------------------------------------------------------------------
// The client, and what its application sees
// ---------------------------------------------------------------------------------------------

/// A [`Client`] over [`WsClientTransport`] to `ws://127.0.0.1:port/`, plus everything it
/// reports to its application, in order.
struct Observed {
    client: Client,
    transport: Arc<WsClientTransport>,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    states: mpsc::UnboundedReceiver<ConnectionState>,
    /// Every client state reported so far.
    seen_states: Vec<ConnectionState>,
    /// Every event taken off `events` so far.
    log: Vec<ClientEvent>,
    _subscriptions: Vec<carrier::client::Subscription>,
}

impl Observed {
    fn new(port: u16) -> Observed {
        let url = format!("ws://127.0.0.1:{port}/");
        let transport = Arc::new(WsClientTransport::new(WsOptions::new(url).token(TOKEN)));
        let client = Client::new(Arc::clone(&transport) as Arc<dyn Transport>);
        let (event_tx, events) = mpsc::unbounded_channel();
        let (state_tx, states) = mpsc::unbounded_channel();
        let subscriptions = vec![
            client.on_event(Box::new(move |event| {
                let _ = event_tx.send(event.clone());
            })),
            client.on_state_change(Box::new(move |state| {
                let _ = state_tx.send(state);
            })),
        ];
        Observed {
            client,
            transport,
            events,
            states,
            seen_states: Vec::new(),
            log: Vec::new(),
            _subscriptions: subscriptions,
        }
    }

    async fn connect(&self) -> Result<carrier::client::HandshakeInfo, ClientError> {
        tokio::time::timeout(WAIT, self.client.connect())
            .await
            .expect("connect() settles in time")
    }

    /// Takes events until one matches `pred` (logging every one) and returns it.
    async fn event(&mut self, what: &str, pred: impl Fn(&ClientEvent) -> bool) -> ClientEvent {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let event = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}; saw {:#?}", self.log))
                .expect("the client is alive");
            self.log.push(event.clone());
            if pred(&event) {
                return event;
            }
        }
    }

    /// Waits for a `Ready` event and returns its resume outcome and skew flag.
    async fn ready(&mut self) -> (ResumeOutcome, bool) {
        match self
            .event("a handshake (Ready)", |e| {
                matches!(e, ClientEvent::Ready { .. })
            })
            .await
        {
            ClientEvent::Ready {
                outcome,
                version_skew,
            } => (outcome, version_skew),
            _ => unreachable!("matched Ready"),
        }
    }

    /// Waits for the `turn_completed` of `turn`.
    async fn turn_completed(&mut self, turn: &str) {
        self.event(&format!("turn_completed of {turn}"), |e| {
            matches!(e, ClientEvent::Session(ReceivedSessionEvent {
                kind: ReceivedSessionEventKind::TurnCompleted { turn_id, .. }, ..
            }) if turn_id == turn)
        })
        .await;
    }

    /// Takes state reports until `state` is reported (logging every one).
    async fn state(&mut self, state: ConnectionState) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.seen_states.last() != Some(&state) {
            let next = tokio::time::timeout_at(deadline, self.states.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("timed out waiting for {state}; saw {:?}", self.seen_states)
                })
                .expect("the client is alive");
            self.seen_states.push(next);
        }
    }

    /// Every state reported so far, including ones not waited for yet.
    fn all_states(&mut self) -> Vec<ConnectionState> {
        while let Ok(state) = self.states.try_recv() {
            self.seen_states.push(state);
        }
        self.seen_states.clone()
    }

    /// The session events delivered to the application so far, in delivery order.
    fn session_events(&self) -> Vec<ReceivedSessionEvent> {
        session_events_in(&self.log)
    }

    async fn submit(&self, prompt: &str) -> String {
        let result = self
            .client
            .request_with_timeout("session.submit", json!({ "prompt": prompt }), WAIT)
            .await
            .expect("session.submit succeeds");
        result["turn_id"]
            .as_str()
            .expect("submit returns a turn_id")
            .to_owned()
    }
}

/// The session events among `log`, in order.
fn session_events_in(log: &[ClientEvent]) -> Vec<ReceivedSessionEvent> {
    log.iter()
        .filter_map(|e| match e {
            ClientEvent::Session(event) => Some(event.clone()),
            _ => None,
        })
        .collect()
}

/// The deltas of `turn`, concatenated.
fn reply_text(events: &[ReceivedSessionEvent], turn: &str) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect()
}

fn seqs(events: &[ReceivedSessionEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

// ---------------------------------------------------------------------------------------------
// A loopback TCP relay that can cut every connection it carries
// ---------------------------------------------------------------------------------------------

/// Accepts on 127.0.0.1:0 and pipes each connection to `127.0.0.1:target`, byte for byte.
/// [`sever`](Relay::sever) drops every connection it carries at that moment, from both ends, as
/// a network failure would; new connections are relayed as before.
struct Relay {
    port: u16,
    /// How many client connections were accepted so far.
    accepted: watch::Receiver<usize>,
    pipes: Arc<Mutex<Vec<JoinHandle<()>>>>,
    acceptor: JoinHandle<()>,
}

impl Relay {
    async fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the relay");
        let port = listener.local_addr().expect("relay address").port();
        let (count, accepted) = watch::channel(0usize);
        let pipes: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let live = Arc::clone(&pipes);
        let acceptor = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.send_modify(|n| *n += 1);
                let pipe = tokio::spawn(async move {
                    // Nothing listening at the target: the client sees its dial fail.
                    let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                let mut pipes = live.lock().expect("relay lock");
                pipes.retain(|pipe| !pipe.is_finished());
                pipes.push(pipe);
            }
        });
        Relay {
            port,
            accepted,
            pipes,
            acceptor,
        }
    }

    /// Cuts every relayed connection; returns how many were still open.
    fn sever(&self) -> usize {
        let pipes: Vec<JoinHandle<()>> = self.pipes.lock().expect("relay lock").drain(..).collect();
        let open = pipes.iter().filter(|pipe| !pipe.is_finished()).count();
        // Aborting drops both sockets of each pipe, so each side sees its peer vanish.
        for pipe in pipes {
            pipe.abort();
        }
        open
    }

    fn accepted(&self) -> usize {
        *self.accepted.borrow()
    }

    /// Waits until `n` connections were accepted; `Err` after `limit`.
    async fn wait_accepted(&mut self, n: usize, limit: Duration) -> Result<(), ()> {
        tokio::time::timeout(limit, self.accepted.wait_for(|accepted| *accepted >= n))
            .await
            .map_err(drop)?
            .map(drop)
            .map_err(drop)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.sever();
    }
}

// ---------------------------------------------------------------------------------------------
// Server restart
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_on_the_same_port_reconnects_and_reports_reset_with_fresh_history() {
    let first = carrier(0, embedded(Duration::from_millis(1))).await;
    let port = port_of(&first);
    let mut c = Observed::new(port);
    let before = c.connect().await.expect("the first handshake");
    assert_eq!(c.ready().await, (ResumeOutcome::New, false));
    assert_eq!(c.client.state(), ConnectionState::Connected);

    // Some history on the first carrier, so the resume point has something to lose.
    let turn = c.submit("before the restart").await;
    c.turn_completed(&turn).await;
    let delivered = c.session_events();
    assert_eq!(
        seqs(&delivered),
        (1..=delivered.len() as u64).collect::<Vec<_>>()
    );
    let point = c.client.resume_point().expect("a resume point");
    assert_eq!(point.epoch, before.epoch);
    assert_eq!(point.after_seq, delivered.len() as u64);

    // Stop it (close 1001 to every client) and start a new carrier on the same port.
    first.stop().await;
    c.state(ConnectionState::Connecting).await;
    let second = carrier(port, embedded(Duration::from_millis(1))).await;

    // The client redials by itself, handshakes with its resume point, and is told `reset`.
    assert_eq!(c.ready().await, (ResumeOutcome::Reset, false));
    c.state(ConnectionState::Connected).await;
    let after = c.client.handshake().expect("the new handshake");
    assert_ne!(after.epoch, before.epoch, "a new carrier has a new epoch");
    assert_eq!(after.resume, ResumeOutcome::Reset);
    // The history is fetched again and handed over: the new carrier's, which is empty.
    let refetched = c
        .event("the history refetch", |e| {
            matches!(
                e,
                ClientEvent::HistoryRefetched { .. } | ClientEvent::HistoryRefetchFailed { .. }
            )
        })
        .await;
    assert_eq!(
        refetched,
        ClientEvent::HistoryRefetched {
            outcome: ResumeOutcome::Reset,
            entries: vec![]
        }
    );
    assert_eq!(
        c.all_states(),
        [
            ConnectionState::Connecting,
            ConnectionState::Connected,
            ConnectionState::Connecting,
            ConnectionState::Connected
        ],
        "never disconnected for good"
    );

    // The resume point starts over in the new epoch, and the new carrier's events, numbered
    // from 1 again, reach the application rather than being dropped as duplicates.
    let point = c.client.resume_point().expect("a resume point");
    assert_eq!(
        (point.epoch.as_str(), point.after_seq),
        (after.epoch.as_str(), 0)
    );
    let already = c.session_events().len();
    let turn = c.submit("after the restart").await;
    c.turn_completed(&turn).await;
    let fresh = c.session_events().split_off(already);
    assert_eq!(seqs(&fresh), (1..=fresh.len() as u64).collect::<Vec<_>>());
    assert_eq!(reply_text(&fresh, &turn), "echo: after the restart");

    c.client.disconnect().await;
    second.stop().await;
}

// ---------------------------------------------------------------------------------------------
// A connection dropped mid-turn
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_mid_turn_resumes_without_losing_or_repeating_an_event() {
    // 30 words at 100 ms a delta: the turn streams for about 3 s, longer than the 1 s backoff.
    let server = carrier(0, embedded(Duration::from_millis(100))).await;
    let relay = Relay::start(port_of(&server)).await;
    let mut c = Observed::new(relay.port);
    c.connect().await.expect("the first handshake");
    assert_eq!(c.ready().await, (ResumeOutcome::New, false));

    let words: Vec<String> = (1..=30).map(|n| format!("w{n}")).collect();
    let prompt = words.join(" ");
    let turn = c.submit(&prompt).await;
    // Cut the connection after a few deltas arrived, while the turn keeps streaming.
    for n in 0..3 {
        c.event(&format!("delta {n}"), |e| {
            matches!(
                e,
                ClientEvent::Session(ReceivedSessionEvent {
                    kind: ReceivedSessionEventKind::TextDelta { .. },
                    ..
                })
            )
        })
        .await;
    }
    assert_eq!(relay.sever(), 1, "one relayed connection was cut");
    c.state(ConnectionState::Connecting).await;

    // It redials through the relay and resumes where the application left off.
    let (outcome, _) = c.ready().await;
    // Events are reported in one ordered stream: what precedes this `Ready` arrived over the
    // cut connection, what follows it over the new one.
    let resumed_at = c.log.len();
    let before_cut = session_events_in(&c.log[..resumed_at]);
    assert!(
        !before_cut
            .iter()
            .any(|e| matches!(e.kind, ReceivedSessionEventKind::TurnCompleted { .. })),
        "the cut happened mid-turn"
    );
    let ResumeOutcome::Resumed { replayed } = outcome else {
        panic!("expected `resumed`, got {outcome:?}");
    };
    assert!(
        replayed >= 1,
        "the turn went on while the client was away, so something was replayed"
    );
    c.state(ConnectionState::Connected).await;
    assert_eq!(relay.accepted(), 2, "exactly one redial");
    c.turn_completed(&turn).await;

    let events = c.session_events();
    assert_eq!(
        seqs(&events),
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "seq 1, 2, 3 … with no gap and no duplicate"
    );
    assert!(
        matches!(&events[0].kind, ReceivedSessionEventKind::TurnStarted { turn_id, prompt: Some(asked), .. }
            if *turn_id == turn && *asked == prompt),
        "turn_started carries the submitted prompt: {:?}",
        events[0].kind
    );
    assert_eq!(reply_text(&events, &turn), format!("echo: {prompt}"));
    let completions: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ReceivedSessionEventKind::TurnCompleted {
                turn_id,
                text,
                aborted,
                ..
            } => Some((turn_id.clone(), text.clone(), *aborted)),
            _ => None,
        })
        .collect();
    assert_eq!(
        completions,
        [(turn.clone(), format!("echo: {prompt}"), false)]
    );
    // Replayed events come right after the handshake, starting after the last one delivered.
    let after_resume = session_events_in(&c.log[resumed_at..]);
    assert_eq!(
        after_resume.first().map(|e| e.seq),
        before_cut.last().map(|e| e.seq + 1)
    );
    assert!(after_resume.len() as u64 >= replayed);
    assert!(
        !c.log.iter().any(|e| matches!(
            e,
            ClientEvent::HistoryRefetched { .. } | ClientEvent::HistoryRefetchFailed { .. }
        )),
        "a clean resume needs no history refetch"
    );
    assert_eq!(
        c.all_states(),
        [
            ConnectionState::Connecting,
            ConnectionState::Connected,
            ConnectionState::Connecting,
            ConnectionState::Connected
        ]
    );

    c.client.disconnect().await;
    server.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Version skew and incompatibility
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_newer_minor_is_version_skew_and_requests_still_work() {
    let server = carrier(0, announcing("1.3", "1.0")).await;
    let mut c = Observed::new(port_of(&server));
    let info = c.connect().await.expect("a skewed server still handshakes");
    assert!(info.version_skew);
    assert_eq!(
        (
            info.protocol_version.to_string(),
            info.min_compatible_protocol.to_string()
        ),
        ("1.3".to_owned(), "1.0".to_owned())
    );
    assert_eq!(c.client.state(), ConnectionState::VersionSkew);
    assert_eq!(c.ready().await, (ResumeOutcome::New, true));
    // Only the handshake layer reports skew; the socket underneath is simply connected.
    assert_eq!(c.transport.state(), ConnectionState::Connected);

    let pong = c
        .client
        .request_with_timeout("system.ping", json!({}), WAIT)
        .await
        .expect("system.ping");
    assert_eq!(pong, json!({}));
    let status = c
        .client
        .request_with_timeout("session.status", json!({}), WAIT)
        .await
        .expect("session.status");
    assert_eq!(status["state"], "idle");
    let system = c
        .client
        .request_with_timeout("system.status", json!({}), WAIT)
        .await
        .expect("system.status");
    assert_eq!(system["protocol_version"], "1.3");
    let turn = c.submit("skewed but fine").await;
    c.turn_completed(&turn).await;
    assert_eq!(
        reply_text(&c.session_events(), &turn),
        "echo: skewed but fine"
    );
    assert_eq!(
        c.all_states(),
        [ConnectionState::Connecting, ConnectionState::VersionSkew]
    );

    c.client.disconnect().await;
    server.stop().await;
}

/// Asserts `error` is the server's `version_incompatible` answer to the handshake, naming both
/// versions.
fn assert_incompatible(error: &ClientError) {
    match error {
        ClientError::Remote { method, error } => {
            assert_eq!(method, "system.handshake");
            assert_eq!(error.code, ErrorCode::VersionIncompatible);
            assert!(
                error.message.contains("server speaks 2.0")
                    && error.message.contains("client speaks 1.2"),
                "{}",
                error.message
            );
        }
        other => panic!("expected the server's version_incompatible, got {other:?}"),
    }
}

/// Longer than the first two backoff delays (1 s + 2 s): a client that redials after a
/// refusal would have dialled again within it.
const NO_REDIAL_WINDOW: Duration = Duration::from_millis(3500);

/// The error the client reported with `HandshakeFailed`.
async fn handshake_failure(c: &mut Observed) -> ClientError {
    match c
        .event("HandshakeFailed", |e| {
            matches!(e, ClientEvent::HandshakeFailed(_))
        })
        .await
    {
        ClientEvent::HandshakeFailed(error) => error,
        _ => unreachable!("matched HandshakeFailed"),
    }
}

/// After a refused handshake the client stays down: no dial within [`NO_REDIAL_WINDOW`], state
/// `disconnected`, and requests fail at once with the refusal instead of waiting for a
/// connection.
async fn assert_stays_refused(c: &Observed, relay: &mut Relay, error: &ClientError) {
    let dials = relay.accepted();
    // Waiting for a dial that must not come.
    assert!(
        relay
            .wait_accepted(dials + 1, NO_REDIAL_WINDOW)
            .await
            .is_err(),
        "the client dialled again after version_incompatible"
    );
    assert_eq!(c.client.state(), ConnectionState::Disconnected);
    let request = c
        .client
        .request_with_timeout("system.ping", json!({}), WAIT)
        .await
        .expect_err("no connection");
    assert_eq!(&request, error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incompatible_server_fails_connect_clearly_and_is_not_redialled() {
    let server = carrier(0, announcing("2.0", "2.0")).await;
    let mut relay = Relay::start(port_of(&server)).await;
    let mut c = Observed::new(relay.port);

    let error = c
        .connect()
        .await
        .expect_err("a 2.0 server refuses a 1.0 client");
    assert_incompatible(&error);
    assert_eq!(handshake_failure(&mut c).await, error);
    c.state(ConnectionState::Disconnected).await;

    assert_eq!(relay.accepted(), 1);
    assert_stays_refused(&c, &mut relay, &error).await;
    assert_eq!(relay.accepted(), 1);
    assert_eq!(c.transport.state(), ConnectionState::Disconnected);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_with_an_incompatible_major_stops_the_client_instead_of_redialling() {
    let first = carrier(0, embedded(Duration::from_millis(1))).await;
    let port = port_of(&first);
    let mut relay = Relay::start(port).await;
    let mut c = Observed::new(relay.port);
    c.connect().await.expect("the first handshake");
    assert_eq!(c.ready().await, (ResumeOutcome::New, false));

    first.stop().await;
    c.state(ConnectionState::Connecting).await;
    let second = carrier(port, announcing("2.0", "2.0")).await;

    let error = handshake_failure(&mut c).await;
    assert_incompatible(&error);
    c.state(ConnectionState::Disconnected).await;
    assert_stays_refused(&c, &mut relay, &error).await;
    second.stop().await;
}
