//! The arguments of the client commands (`send`, `connect`, `status`, `doctor`).

use std::ops::RangeInclusive;

use clap::Args;

/// `carrier send [URL] PROMPT`: one turn, the reply on stdout.
#[derive(Debug, Clone, Args)]
// Two optional positionals rather than clap's `allow_missing_positional`, which would take the
// URL of `send URL --token T PROMPT` for the prompt; [`SendArgs::target_and_prompt`] sorts them.
#[command(override_usage = "carrier send [OPTIONS] [URL] <PROMPT>")]
pub struct SendArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (default: the one running carrier's runtime file)
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// The prompt to submit (given alone, the first argument is the prompt)
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Answer permission requests of this turn with "allow"
    #[arg(long, conflicts_with = "deny")]
    pub allow: bool,
    /// Answer permission requests of this turn with "deny" (the default)
    #[arg(long)]
    pub deny: bool,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

impl SendArgs {
    /// `(URL, PROMPT)`: one argument is the prompt alone.
    pub fn target_and_prompt(&self) -> Option<(Option<&str>, &str)> {
        match (self.url.as_deref(), self.prompt.as_deref()) {
            (url, Some(prompt)) => Some((url, prompt)),
            (Some(prompt), None) => Some((None, prompt)),
            (None, None) => None,
        }
    }
}

/// `carrier connect [URL]`: an interactive console.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (default: the one running carrier's runtime file)
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect read-only (role observe)
    #[arg(long)]
    pub observe: bool,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

/// `carrier status [--json] [URL]`: a server's `system.status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print the status as one JSON line (the `system.status` result plus `url`)
    #[arg(long)]
    pub json: bool,
    /// Server URL (default: the one running carrier's runtime file)
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

/// `carrier doctor`: what is listening locally, versions, compatibility, what to update.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Also check the carrier at this ws:// URL (a loopback address; e.g. one whose runtime file
    /// cannot be verified because an older carrier wrote it)
    pub url: Option<String>,
    /// Token used to handshake with each server of yours found (without it only /healthz is
    /// checked; another user's listener never gets it)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The ports `doctor` probes: the default port and its `--max-retries` successors.
pub const DOCTOR_PORTS: RangeInclusive<u16> = 7070..=7090;
