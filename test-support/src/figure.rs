//! The README's "Memory bounds" figure, computed from the flags a `carrier serve` runs with, term
//! by term as the README writes it: the bound the memory tests hold a real carrier's resident
//! memory to.

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The flags a carrier runs with, and what the figure is computed from.
#[derive(Debug, Clone)]
pub struct Flags {
    /// `--max-inbound-bytes`.
    pub max_inbound_bytes: u64,
    /// `--max-message-bytes`.
    pub max_message_bytes: u64,
    /// `--max-text-bytes`.
    pub max_text_bytes: u64,
    /// `--max-reply-bytes`.
    pub max_reply_bytes: u64,
    /// `--queue-bytes`.
    pub queue_bytes: u64,
    /// `--max-session-bytes`.
    pub max_session_bytes: u64,
    /// `--threads`.
    pub threads: u64,
    /// `--demo-delay-ms`.
    pub demo_delay_ms: u64,
    /// Whether the carrier hosts an ACP agent (`--agent-acp`), which adds its terms.
    pub acp_agent: bool,
}

impl Flags {
    /// The defaults, with two worker threads and no demo delay.
    pub fn defaults() -> Flags {
        Flags {
            max_inbound_bytes: 64 * MIB,
            max_message_bytes: 16 * MIB,
            max_text_bytes: MIB,
            max_reply_bytes: MIB,
            queue_bytes: 8 * MIB,
            max_session_bytes: 64 * MIB,
            threads: 2,
            demo_delay_ms: 0,
            acp_agent: false,
        }
    }

    /// The flags as `carrier serve` arguments.
    pub fn args(&self) -> Vec<String> {
        [
            ("--max-inbound-bytes", self.max_inbound_bytes),
            ("--max-message-bytes", self.max_message_bytes),
            ("--max-text-bytes", self.max_text_bytes),
            ("--max-reply-bytes", self.max_reply_bytes),
            ("--queue-bytes", self.queue_bytes),
            ("--max-session-bytes", self.max_session_bytes),
            ("--threads", self.threads),
            ("--demo-delay-ms", self.demo_delay_ms),
        ]
        .iter()
        .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
        .collect()
    }

    /// The README's figure, in bytes, for `connections` admitted connections and
    /// `bulk_channels` bulk channels mounted (each with the default 1 MiB window).
    pub fn readme_figure(&self, connections: u64, bulk_channels: u64) -> u64 {
        /// An idle `carrier serve`'s resident memory, as the README states it.
        const BASELINE: u64 = 16 * MIB;
        /// Each connection's allowance of its own for small messages.
        const ALLOWANCE: u64 = 64 * KIB;
        /// A bulk channel's window (and so a connection's credit on it).
        const BULK_WINDOW: u64 = MIB;
        /// What a credit ledger's waiting frames may hold: twice the credit and 16 KiB.
        const LEDGER: u64 = 2 * BULK_WINDOW + 16 * KIB;
        /// Each connection's own state (task, queue, session binding).
        const CONNECTION: u64 = 10 * KIB;
        /// What an `/acp` connection holds besides: its 16 running prompts (ids of at most
        /// 256 bytes, an error of at most 256), 64 unanswered permission requests and the
        /// sessions it has bound (at most `max_sessions`), with their listeners.
        const ACP_STATE: u64 = 48 * KIB;
        /// An agent process's longest line.
        const AGENT_LINE: u64 = MIB;
        /// An entry's envelope and what it is charged beyond its bytes.
        const ENTRY_ENVELOPE: u64 = 4 * KIB;
        /// `limits.max_sessions`: at most this many sessions, so this many turns at once.
        const MAX_SESSIONS: u64 = 64;
        /// What a session keeps besides its entries and its running turn (hub, agent, record).
        const SESSION_STATE: u64 = KIB;
        /// The history an answer copies before it is fitted (one session's own bound).
        const HISTORY_COPIED: u64 = 4 * MIB;
        /// Refused sockets lingering for their close, and what each holds.
        const REFUSED: u64 = 64 * 16 * KIB;
        /// Connections not yet upgraded, and what each holds.
        const NOT_UPGRADED: u64 = 512 * 10 * KIB;
        /// An ACP agent's lines: 32 read ahead, one being read, and the one being handled
        /// with its parsed parts (params, update, a text chunk's copy).
        const ACP_LINES: u64 = (32 + 1 + 3) * AGENT_LINE;
        /// An ACP agent's open permission requests (at most 64), each its tool call parsed
        /// (at most 16 KiB of JSON, up to 32 times that parsed) and its short options.
        const ACP_PERMISSIONS: u64 = 64 * MIB;

        let (n, k) = (connections, bulk_channels);
        let inbound = self.max_inbound_bytes + n * ALLOWANCE;
        let outbound = n * (self.queue_bytes + self.max_message_bytes);
        let bulk_windows = n * k * (BULK_WINDOW + self.max_message_bytes);
        let buffered_credit = n * k * LEDGER;
        let connection_state = n * (CONNECTION + ACP_STATE);
        // The budget, and the one entry being added past it: a prompt or an agent's line.
        let one_entry = self.max_text_bytes.max(AGENT_LINE) + ENTRY_ENVELOPE;
        let sessions = self.max_session_bytes + one_entry + MAX_SESSIONS * SESSION_STATE;
        // The carrier keeps each running turn's prompt and reply; the embedded agent holds
        // the reply it streams.
        let turns = MAX_SESSIONS * (2 * self.max_text_bytes + self.max_reply_bytes);
        // Each worker thread may be building one answer: up to twice the outbound budget while
        // it is encoded, and the history it was copied from.
        let in_hand = self.threads * (2 * self.queue_bytes + HISTORY_COPIED);
        let acp = if self.acp_agent {
            ACP_LINES + ACP_PERMISSIONS
        } else {
            0
        };
        BASELINE
            + acp
            + inbound
            + outbound
            + bulk_windows
            + buffered_credit
            + connection_state
            + sessions
            + turns
            + in_hand
            + REFUSED
            + NOT_UPGRADED
    }
}
