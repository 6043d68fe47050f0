//! `carrier send`: one turn, the reply streamed to stdout.

use std::io::Write;
use std::process::ExitCode;

use carrier::client::{ClientEvent, Decision, ReceivedSessionEventKind, ResumeOutcome};
use sha2::{Digest as _, Sha256};

use carrier::discovery::RuntimeDir;

use super::args::SendArgs;
use super::failure::{explain, Failure};
use super::session::{closed_for_good, open};
use super::target::{resolve_target, Target};

/// `carrier send` with explicit output streams.
pub async fn send_with(args: SendArgs, out: &mut impl Write, err: &mut impl Write) -> ExitCode {
    let Some((url, prompt)) = args.target_and_prompt() else {
        return Failure::usage("give the prompt to send: carrier send [URL] PROMPT").report(err);
    };
    let runtime = RuntimeDir::for_user();
    let target = match resolve_target(url, args.token.as_deref(), args.any_owner, &runtime, err) {
        Ok(target) => target,
        Err(failure) => return failure.report(err),
    };
    match send_turn(&args, &target, prompt, out, err).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(err),
    }
}

/// What of the reply reached stdout, as its length and SHA-256 rather than its text: a reply
/// streams for as long as the agent talks, and all that is asked of it at the end is whether
/// the final text begins with it.
#[derive(Default)]
struct Printed {
    len: usize,
    digest: Sha256,
}

impl Printed {
    fn push(&mut self, delta: &str) {
        self.len += delta.len();
        self.digest.update(delta.as_bytes());
    }

    /// The part of `text` after what was printed, when `text` begins with it (a final text cut
    /// shorter than the deltas, or one that differs, leaves nothing to add).
    fn rest_of<'t>(&self, text: &'t str) -> Option<&'t str> {
        let head = text.get(..self.len)?;
        (Sha256::digest(head) == self.digest.clone().finalize()).then(|| &text[self.len..])
    }
}

async fn send_turn(
    args: &SendArgs,
    target: &Target,
    prompt: &str,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Failure> {
    let decision = if args.allow {
        Decision::Allow
    } else {
        Decision::Deny
    };
    let mut session = open(target, None, err).await?;
    let turn = session
        .client
        .submit(prompt)
        .await
        .map_err(|error| explain(&target.url, &error))?;
    // What reached stdout, so text lost to a reconnect gap can be completed from the final text.
    let mut printed = Printed::default();
    let finish = |printed: &Printed, text: &str, out: &mut dyn Write| {
        if let Some(rest) = printed.rest_of(text) {
            let _ = out.write_all(rest.as_bytes());
        }
        let _ = writeln!(out);
        let _ = out.flush();
    };
    loop {
        tokio::select! {
            event = session.events.recv() => {
                let Some(event) = event else {
                    return Err(Failure::runtime("the client stopped"));
                };
                match event {
                    ClientEvent::Session(event) => match event.kind {
                        ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                            let _ = out.write_all(delta.as_bytes());
                            let _ = out.flush();
                            printed.push(&delta);
                        }
                        ReceivedSessionEventKind::PermissionRequest { turn_id, request_id, tool, .. }
                            if turn_id == turn =>
                        {
                            let _ = writeln!(
                                err,
                                "carrier: `{tool}` asked for permission: {} (use --allow or --deny)",
                                decision.as_str()
                            );
                            session
                                .client
                                .respond(request_id, decision)
                                .await
                                .map_err(|error| explain(&target.url, &error))?;
                        }
                        ReceivedSessionEventKind::Error { turn_id: Some(turn_id), code, message }
                            if turn_id == turn =>
                        {
                            let _ = writeln!(err, "carrier: session error {code}: {message}");
                        }
                        ReceivedSessionEventKind::TurnCompleted { turn_id, text, aborted, .. }
                            if turn_id == turn =>
                        {
                            finish(&printed, &text, out);
                            if aborted {
                                return Err(Failure::runtime("the turn was aborted"));
                            }
                            return Ok(());
                        }
                        _ => {}
                    },
                    ClientEvent::Ready { outcome: ResumeOutcome::Reset, .. } => {
                        return Err(Failure::runtime(
                            "the server restarted during the turn; its reply is lost",
                        ));
                    }
                    ClientEvent::HistoryRefetched { entries, .. } => {
                        // Events were lost: if the reply is in the history, the turn is over.
                        if let Some(reply) = entries
                            .iter()
                            .rev()
                            .find(|e| e.turn_id.as_deref() == Some(&turn) && e.role != "user")
                        {
                            finish(&printed, &reply.text, out);
                            return Ok(());
                        }
                    }
                    ClientEvent::HandshakeFailed(error) => return Err(explain(&target.url, &error)),
                    _ => {}
                }
            }
            state = session.states.recv() => {
                if state.is_none_or(closed_for_good) {
                    return Err(Failure::runtime(format!(
                        "the connection to {} closed before the turn completed",
                        target.url
                    )));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_text_completes_what_was_printed_only_when_it_begins_with_it() {
        let mut printed = Printed::default();
        assert_eq!(printed.rest_of("hello"), Some("hello"));
        printed.push("he");
        printed.push("l");
        assert_eq!(printed.rest_of("hello"), Some("lo"));
        assert_eq!(printed.rest_of("hel"), Some(""));
        // Different text, a text cut shorter than what was printed, a cut inside a character.
        assert_eq!(printed.rest_of("help!"), Some("p!"));
        assert_eq!(printed.rest_of("HELLO"), None);
        assert_eq!(printed.rest_of("he"), None);
        let mut wide = Printed::default();
        wide.push("é");
        assert_eq!(wide.rest_of("éa"), Some("a"));
        assert_eq!(
            Printed {
                len: 1,
                ..Printed::default()
            }
            .rest_of("éa"),
            None
        );
    }
}
