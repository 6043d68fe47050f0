//! What the agent-side tests share: the SDK agents of `fixtures/agents/` (installed once per
//! test binary — `npm ci` from the committed lock file, the Python SDK with `pip install
//! --target` into a folder under the target directory, never globally), a carrier on
//! 127.0.0.1 hosting one of them in this process, and what the agent recorded of carrier's
//! messages.

#![allow(dead_code)] // each test binary uses its share

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use carrier_acp::agent_host::{AcpAgent, AcpAgentConfig};
use carrier_agent::process::AgentProcessConfig;
use carrier_test_support::{config, node, repo, Client, Server};
use serde_json::Value;

pub(crate) fn fixtures() -> PathBuf {
    repo().join("acp/tests/fixtures/agents")
}

/// The Node agent's dependencies, installed once per test binary.
pub(crate) fn node_sdk() {
    static DONE: Mutex<bool> = Mutex::new(false);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if !*done {
        node::npm_ci(&fixtures());
        *done = true;
    }
}

/// The Python SDK, pinned by `requirements.txt`, in a folder under the target directory;
/// installed once (kept while the requirements file is older than it).
pub(crate) fn python_sdk() -> PathBuf {
    static DONE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dir) = done.as_ref() {
        return dir.clone();
    }
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| repo().join("target"));
    let dir = target.join("acp-python-sdk");
    let requirements = fixtures().join("requirements.txt");
    let stamp = dir.join(".installed");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = matches!(
        (modified(&stamp), modified(&requirements)),
        (Some(installed), Some(wanted)) if installed >= wanted
    );
    if !fresh {
        let _ = std::fs::remove_dir_all(&dir);
        let mut pip = Command::new("python3");
        pip.args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
            .arg(&dir)
            .arg("-r")
            .arg(&requirements);
        let out = node::run(pip, "pip install of the Python ACP SDK");
        assert!(
            out.success,
            "pip install --target {} -r {} failed: Python 3.10+ with pip is needed, and PyPI \
             must be reachable:\n{}",
            dir.display(),
            requirements.display(),
            out.report()
        );
        std::fs::write(&stamp, b"").expect("stamp");
    }
    *done = Some(dir.clone());
    dir
}

/// How long the tests let the agent take to answer: generous, a contract, not a speed.
pub(crate) const AGENT_TIMEOUT: Duration = Duration::from_secs(20);

/// `env VAR=… PROGRAM ARGS` as the agent's command, so the child gets the variables.
fn command(env: &[(&str, String)], program: &str, args: &[String]) -> AcpAgentConfig {
    let mut words: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    words.push(program.to_owned());
    words.extend(args.iter().cloned());
    AcpAgentConfig::new(AgentProcessConfig::new("env", words)).request_timeout(AGENT_TIMEOUT)
}

/// The Node SDK agent, recording carrier's messages to `record`, plus `env`.
pub(crate) fn node_agent(record: &Path, env: &[(&str, &str)]) -> AcpAgentConfig {
    node_sdk();
    let mut vars = vec![("ACP_RECORD", record.display().to_string())];
    vars.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let script = fixtures().join("sdk-agent.mjs").display().to_string();
    command(&vars, "node", &[script])
}

/// The Python SDK agent, recording carrier's messages to `record`.
pub(crate) fn python_agent(record: &Path) -> AcpAgentConfig {
    let sdk = python_sdk();
    let vars = vec![
        ("ACP_RECORD", record.display().to_string()),
        ("PYTHONPATH", sdk.display().to_string()),
    ];
    let script = fixtures().join("sdk_agent.py").display().to_string();
    command(&vars, "python3", &[script])
}

/// A carrier on 127.0.0.1 hosting an ACP agent, and the file the agent records to.
pub(crate) struct Hosted {
    pub(crate) server: Server,
    pub(crate) agent: AcpAgent,
    pub(crate) record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Hosted {
    /// Starts the agent `make` builds (given the record file) and a carrier serving it.
    pub(crate) async fn start(make: impl FnOnce(&Path) -> AcpAgentConfig) -> Hosted {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = dir.path().join("received.jsonl");
        let agent = AcpAgent::start(make(&record))
            .await
            .expect("the ACP agent starts");
        let server = Server::with(config(), agent.profile()).await;
        Hosted {
            server,
            agent,
            record,
            _dir: dir,
        }
    }

    /// A drive connection, handshaken.
    pub(crate) async fn drive(&self) -> Client {
        self.server.drive().await.0
    }

    /// Every message carrier sent the agent so far, as JSON.
    pub(crate) fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("carrier sends JSON lines"))
            .collect()
    }

    /// The methods of what carrier sent, in order (`→result` for its answers).
    pub(crate) fn received_methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|m| match m["method"].as_str() {
                Some(method) => method.to_owned(),
                None => "→result".to_owned(),
            })
            .collect()
    }

    /// Waits (bounded) until carrier has sent the agent a message that `pred` matches.
    pub(crate) async fn until_received(&self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + carrier_test_support::WAIT;
        loop {
            if let Some(found) = self.received().into_iter().find(|m| pred(m)) {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "carrier never sent the agent such a message: {:?}",
                self.received()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) async fn stop(self) {
        self.server.transport.stop().await;
        self.agent.stop().await;
    }
}

/// The `update` objects of a turn's `session.agent_update` events.
pub(crate) fn updates(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "session.agent_update")
        .map(|e| e["payload"]["update"].clone())
        .collect()
}
