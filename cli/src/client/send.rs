//! `carrier send`: one turn, the reply streamed to stdout.

use std::io::Write;
use std::process::ExitCode;

use carrier::client::{ClientEvent, Decision, ResumeOutcome, SessionEventKind};

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
    let mut printed = String::new();
    let finish = |printed: &str, text: &str, out: &mut dyn Write| {
        if let Some(rest) = text.strip_prefix(printed) {
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
                        SessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                            let _ = out.write_all(delta.as_bytes());
                            let _ = out.flush();
                            printed.push_str(&delta);
                        }
                        SessionEventKind::PermissionRequest { turn_id, request_id, tool, .. }
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
                        SessionEventKind::Error { turn_id: Some(turn_id), code, message }
                            if turn_id == turn =>
                        {
                            let _ = writeln!(err, "carrier: session error {code}: {message}");
                        }
                        SessionEventKind::TurnCompleted { turn_id, text, aborted, .. }
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
