//! [`WsTransport`]: the carrier's lifecycle — `new` → `attach` → `start` → `stop`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rand::TryRngCore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config::{Auth, CarrierConfig, ConfigError};
use super::context::{CarrierContext, ContextParts, DriverInfo};
use super::http::CarrierService;
use super::listener::{accept_loop, bind_loopback, BindError};
use super::metrics::Metrics;
use super::profile::Attachment;
use super::registry::{ChannelError, ChannelHandle, ChannelRegistry};
use super::shared::{Running, Shared};
use super::unix_listener::UnixSocket;
use carrier_discovery::{RuntimeDir, RuntimeEntry, RuntimeFile, RuntimeSlot};
use carrier_protocol::admission::{AdmissionPolicy, CloseRefusal, Token};
use carrier_protocol::channel::ChannelDescriptor;
use carrier_protocol::close::CloseCode;

/// A lifecycle call made in the wrong state, or a bind failure.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// `start()` before `attach()` (or after `stop()` without a new `attach()`).
    #[error("start() needs attach() first: no session is attached")]
    NotAttached,
    /// `start()` while already running.
    #[error("the transport is already running")]
    AlreadyRunning,
    /// No free port.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// [`WsTransport::with_runtime_file`] on a carrier started with
    /// [`WsTransport::start_mounted`], which cannot know the URL clients reach it at: start it
    /// with [`WsTransport::start_mounted_at`] instead.
    #[error(
        "with_runtime_file needs the URL clients reach this carrier at, and a mounted carrier \
         cannot know it: call start_mounted_at(\"ws://127.0.0.1:PORT/PATH\") with the port \
         your server listens on and the path the carrier is mounted at"
    )]
    RuntimeFileNeedsUrl,
    /// The URL given to [`WsTransport::start_mounted_at`] is not one a runtime file can list.
    #[error("start_mounted_at({url:?}): the URL {reason}; give ws://127.0.0.1:PORT/PATH")]
    MountUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The runtime file asked for cannot be written.
    #[error(transparent)]
    RuntimeFile(#[from] carrier_discovery::RuntimeFileError),
    /// The Unix socket asked for ([`UnixSocket::At`]) cannot be created.
    #[cfg(unix)]
    #[error(transparent)]
    UnixSocket(#[from] carrier_discovery::SocketPathError),
}

#[derive(Default)]
struct State {
    attachment: Option<Attachment>,
    port: Option<u16>,
    /// Where clients reach a mounted carrier ([`WsTransport::start_mounted_at`]).
    mounted_url: Option<String>,
    shutdown: Option<watch::Sender<bool>>,
    /// The accept loops: TCP, and the Unix socket's.
    accepts: Vec<JoinHandle<()>>,
    /// Removes the runtime file when dropped: on `stop()`, or with the transport.
    runtime_file: Option<RuntimeFile>,
    /// Removes the Unix socket when dropped, likewise.
    #[cfg(unix)]
    socket_file: Option<carrier_discovery::SocketFile>,
}

/// Where and what a [`WsTransport`] advertises in its runtime file
/// ([`carrier_discovery`]), so local clients find it without being given a URL or token.
#[derive(Debug, Clone)]
pub struct RuntimeFileOptions {
    dir: RuntimeDir,
    include_token: bool,
}

impl RuntimeFileOptions {
    /// The user's runtime directory ([`RuntimeDir::for_user`]), token included.
    pub fn for_user() -> Self {
        Self::in_dir(RuntimeDir::for_user())
    }

    /// Another directory, token included.
    pub fn in_dir(dir: RuntimeDir) -> Self {
        RuntimeFileOptions {
            dir,
            include_token: true,
        }
    }

    /// Writes `token: null`, for a host that hands its token out another way (as
    /// `carrier serve --token-file` does).
    pub fn without_token(mut self) -> Self {
        self.include_token = false;
        self
    }
}

/// A loopback WebSocket carrier for one agent session host. What rides on its text frames is
/// the attached [`TextProfile`](crate::TextProfile): the agent protocol's (`AgentProfile`, in
/// `carrier-agent`) or, as here, one of the host's own.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use carrier_server::{
///     CarrierConfig, CarrierContext, Connection, TextProfile, TextSession, WsTransport,
/// };
///
/// /// Echoes every text message.
/// struct Echo;
/// struct EchoSession(Connection);
/// impl TextProfile for Echo {
///     fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
///         conn.mark_handshaken();
///         Box::new(EchoSession(conn))
///     }
/// }
/// impl TextSession for EchoSession {
///     fn on_text(&mut self, text: &str) {
///         let _ = self.0.send_text(text.to_owned());
///     }
/// }
///
/// let transport = WsTransport::new(CarrierConfig::default().with_port(0))?;
/// transport.attach(Arc::new(Echo));
/// transport.start().await?;
/// println!("ws://127.0.0.1:{}/?token={}", transport.bound_port().unwrap_or(0), transport.resolved_token().unwrap_or_default());
/// transport.stop().await;
/// # Ok(()) }
/// ```
pub struct WsTransport {
    config: CarrierConfig,
    token: Option<Token>,
    runtime_file: Option<RuntimeFileOptions>,
    unix_socket: UnixSocket,
    shared: Arc<Shared>,
    state: Mutex<State>,
}

/// Mints a per-launch token: 32 bytes of OS randomness as 64 hex characters (valid in a URL
/// and as a `Sec-WebSocket-Protocol` value). Fails rather than falling back to anything weaker.
pub fn mint_token() -> Result<String, ConfigError> {
    mint_token_from(&mut rand::rngs::OsRng)
}

/// [`mint_token`] over any fallible random source (the OS one in production; tests pass one
/// that fails).
fn mint_token_from<R: TryRngCore>(rng: &mut R) -> Result<String, ConfigError> {
    let mut bytes = [0u8; 32];
    rng.try_fill_bytes(&mut bytes)
        .map_err(|e| ConfigError::RandomSource(e.to_string()))?;
    Ok(hex::encode(bytes))
}

fn mint_epoch() -> String {
    let mut bytes = [0u8; 8];
    // The epoch only has to differ between launches; a clock-derived fallback is fine here.
    if rand::rngs::OsRng.try_fill_bytes(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = (nanos as u64).to_be_bytes();
    }
    hex::encode(bytes)
}

impl WsTransport {
    /// Validates the configuration and mints the token when [`Auth::Mint`] asks for one.
    /// Nothing is bound yet.
    pub fn new(config: CarrierConfig) -> Result<Self, ConfigError> {
        Self::minting_from(config, &mut rand::rngs::OsRng)
    }

    fn minting_from<R: TryRngCore>(
        config: CarrierConfig,
        rng: &mut R,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let token = match &config.auth {
            Auth::Mint => Some(Token::new(mint_token_from(rng)?)),
            Auth::Token(token) => Some(token.clone()),
            Auth::Open { .. } => None,
        };
        let policy = AdmissionPolicy {
            token: token.clone(),
            grant: config.role,
            allowed_hosts: config.allowed_hosts.clone(),
            allowed_origins: config.allowed_origins.clone(),
        };
        let shared = Arc::new(Shared::new(
            config.limits.clone(),
            policy,
            ChannelRegistry::default(),
        ));
        Ok(WsTransport {
            config,
            token,
            runtime_file: None,
            unix_socket: UnixSocket::default(),
            shared,
            state: Mutex::new(State::default()),
        })
    }

    /// Opt-in: while running, advertise this carrier in a runtime file (`{pid, url, port, role,
    /// token, started, pid_start, socket}`; docs/protocol.md, "Discovery and the CLI") so
    /// `carrier send`, `connect`, `status`, `pipe` and `doctor` find it without a URL or token;
    /// the file is removed on `stop()`. With [`WsTransport::start`] a file that cannot be
    /// written is logged as a warning and the carrier runs without it.
    ///
    /// A carrier mounted in the host's own server ([`WsTransport::service`]) is advertised at
    /// the URL given to [`WsTransport::start_mounted_at`], path included, and a file that
    /// cannot be written fails that start; [`WsTransport::start_mounted`], which knows no URL,
    /// fails with [`LifecycleError::RuntimeFileNeedsUrl`] rather than run unadvertised.
    ///
    /// On Unix this also opens the carrier's Unix socket beside the file (`<pid>.sock`, unless
    /// [`WsTransport::with_unix_socket`] says otherwise), which the file lists and the project's
    /// clients then use: a process of this user reaches it without a token, checked by its peer
    /// credentials, and no other user's process is served there.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), carrier_server::ConfigError> {
    /// use carrier_server::{CarrierConfig, RuntimeFileOptions, WsTransport};
    /// let transport = WsTransport::new(CarrierConfig::default())?
    ///     .with_runtime_file(RuntimeFileOptions::for_user());
    /// # Ok(()) }
    /// ```
    pub fn with_runtime_file(mut self, options: RuntimeFileOptions) -> Self {
        self.runtime_file = Some(options);
        self
    }

    /// Where the Unix socket goes ([`UnixSocket`]): beside the runtime file (the default), at a
    /// path of the host's choosing, or nowhere. A socket needs no runtime file: with
    /// [`UnixSocket::At`] a host that advertises nothing still gets one. Not Unix: ignored.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), carrier_server::ConfigError> {
    /// use carrier_server::{CarrierConfig, RuntimeFileOptions, UnixSocket, WsTransport};
    /// let transport = WsTransport::new(CarrierConfig::default())?
    ///     .with_runtime_file(RuntimeFileOptions::for_user())
    ///     .with_unix_socket(UnixSocket::Off);
    /// # Ok(()) }
    /// ```
    pub fn with_unix_socket(mut self, place: UnixSocket) -> Self {
        self.unix_socket = place;
        self
    }

    /// The runtime file written by the last `start()`, while running.
    pub fn runtime_file(&self) -> Option<std::path::PathBuf> {
        self.state()
            .runtime_file
            .as_ref()
            .map(|f| f.path().to_owned())
    }

    /// The Unix socket bound by the last `start()`, while running.
    pub fn unix_socket_path(&self) -> Option<std::path::PathBuf> {
        #[cfg(unix)]
        return self
            .state()
            .socket_file
            .as_ref()
            .map(|f| f.path().to_owned());
        #[cfg(not(unix))]
        None
    }

    /// The name this start publishes under, when it advertises itself (a directory that cannot
    /// be used is a warning: the carrier runs without a runtime file).
    fn claim_runtime_slot(&self) -> Option<RuntimeSlot> {
        let options = self.runtime_file.as_ref()?;
        match options.dir.claim(std::process::id()) {
            Ok(slot) => Some(slot),
            Err(e) => {
                tracing::warn!(error = %e, "no runtime file: clients must be given the URL and token");
                None
            }
        }
    }

    /// Binds the Unix socket where [`UnixSocket`] says, if anywhere. Only a path the host named
    /// fails the start; the default place falls back to TCP alone, with a warning.
    #[cfg(unix)]
    fn bind_unix_socket(
        &self,
        slot: Option<&RuntimeSlot>,
    ) -> Result<Option<super::unix_listener::BoundSocket>, LifecycleError> {
        let (path, named) = match (&self.unix_socket, slot) {
            (UnixSocket::Off, _) | (UnixSocket::BesideRuntimeFile, None) => return Ok(None),
            (UnixSocket::BesideRuntimeFile, Some(slot)) => (slot.socket_path(), false),
            (UnixSocket::At(path), _) => (path.clone(), true),
        };
        match super::unix_listener::bind(&path, self.shared.metrics.clone()) {
            Ok(bound) => Ok(Some(bound)),
            Err(e) if named => Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, "no Unix socket: local clients use TCP");
                Ok(None)
            }
        }
    }

    /// Writes the runtime file for `port` (and the socket), or says why not.
    fn publish_runtime_file(
        &self,
        slot: Option<RuntimeSlot>,
        port: Option<u16>,
        socket: Option<std::path::PathBuf>,
    ) -> Option<RuntimeFile> {
        let (options, slot, port) = (self.runtime_file.as_ref()?, slot?, port?);
        let token = (self.token.as_ref())
            .filter(|_| options.include_token)
            .map(|t| t.expose().to_owned());
        let mut entry = RuntimeEntry::for_this_process(port, self.config.role, token);
        entry.socket = socket;
        match slot.publish(&entry) {
            Ok(file) => {
                tracing::debug!(path = %file.path().display(), "runtime file written");
                Some(file)
            }
            Err(e) => {
                tracing::warn!(error = %e, "no runtime file: clients must be given the URL and token");
                None
            }
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Attaches what serves text frames: a profile at `/` (e.g.
    /// the agent protocol's `AgentProfile`), and other profiles at other paths
    /// ([`Attachment::with_route`]). Needed before every `start()`; replaces the previous
    /// attachment, routes and all.
    pub fn attach(&self, attachment: impl Into<Attachment>) {
        let attachment = attachment.into();
        let profile = attachment.profile();
        self.shared.metrics.show_gauges(profile.gauges());
        self.shared.show_assets(profile.assets());
        self.state().attachment = Some(attachment);
    }

    /// Binds 127.0.0.1 (and the Unix socket, see [`WsTransport::with_unix_socket`]) and starts
    /// accepting. Errors: not attached, already running, no port, a Unix socket path that
    /// cannot be used.
    pub async fn start(&self) -> Result<(), LifecycleError> {
        let attachment = {
            let st = self.state();
            if st.shutdown.is_some() {
                return Err(LifecycleError::AlreadyRunning);
            }
            st.attachment.clone().ok_or(LifecycleError::NotAttached)?
        };
        let listener = bind_loopback(self.config.port, self.config.max_retries).await?;
        let port = listener.local_addr().map(|a| a.port()).ok();
        let slot = self.claim_runtime_slot();
        #[cfg(unix)]
        let socket = self.bind_unix_socket(slot.as_ref())?;
        #[cfg(unix)]
        let socket_path = socket.as_ref().map(|s| s.file.path().to_owned());
        #[cfg(not(unix))]
        let socket_path = None;
        let runtime_file = self.publish_runtime_file(slot, port, socket_path);
        let ctx = self.context(mint_epoch());
        let (tx, rx) = watch::channel(false);
        {
            let mut st = self.state();
            if st.shutdown.is_some() {
                return Err(LifecycleError::AlreadyRunning);
            }
            *self
                .shared
                .running
                .write()
                .unwrap_or_else(|e| e.into_inner()) = Some(Running { attachment, ctx });
            self.shared.stopping.store(false, Ordering::Release);
            st.port = port;
            st.runtime_file = runtime_file;
            st.accepts = vec![tokio::spawn(accept_loop(
                listener,
                self.shared.clone(),
                rx.clone(),
            ))];
            #[cfg(unix)]
            if let Some(socket) = socket {
                st.socket_file = Some(socket.file);
                st.accepts.push(tokio::spawn(accept_loop(
                    socket.listener,
                    self.shared.clone(),
                    rx,
                )));
            }
            st.shutdown = Some(tx);
        }
        tracing::info!(port, "carrier listening on 127.0.0.1");
        Ok(())
    }

    fn context(&self, epoch: String) -> CarrierContext {
        CarrierContext::new(ContextParts {
            limits: self.shared.limits.clone(),
            grant: self.config.role,
            driver: DriverInfo {
                driver_id: self.config.driver_id.clone(),
                surface: self.config.surface.clone(),
            },
            epoch: Arc::from(epoch),
            metrics: self.shared.metrics.clone(),
            registry: self.shared.registry.clone(),
        })
    }

    /// Stops accepting, closes every client with 1001 (forcing those that do not answer within
    /// the grace period, 3 s by default) and detaches the session: a restart needs `attach()`.
    /// Safe to call more than once, and before `start()`.
    pub async fn stop(&self) {
        let (shutdown, accepts, profile) = {
            let mut st = self.state();
            st.attachment = None;
            st.port = None;
            st.mounted_url = None;
            // First, so no client finds a carrier that is going away.
            st.runtime_file = None;
            #[cfg(unix)]
            {
                st.socket_file = None;
            }
            let running = self
                .shared
                .running
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            (
                st.shutdown.take(),
                std::mem::take(&mut st.accepts),
                running.map(|r| r.attachment.profile().clone()),
            )
        };
        let Some(shutdown) = shutdown else { return };
        self.shared.stopping.store(true, Ordering::Release);
        let _ = shutdown.send(true);
        for accept in accepts {
            let _ = accept.await;
        }
        for entry in self.shared.connections.iter() {
            entry
                .value()
                .0
                .close(CloseCode::GOING_AWAY, "server stopping");
        }
        let grace = self.shared.limits.stop_grace;
        if tokio::time::timeout(grace, self.shared.all_tasks_done())
            .await
            .is_err()
        {
            for entry in self.shared.connections.iter() {
                entry.value().1.fire();
            }
            let _ = tokio::time::timeout(
                std::time::Duration::from_millis(300),
                self.shared.all_tasks_done(),
            )
            .await;
        }
        if let Some(profile) = profile {
            profile.shutdown();
        }
        tracing::info!("carrier stopped");
    }

    /// The port bound by the last `start()`, while running (`None` after
    /// [`Self::start_mounted`] and [`Self::start_mounted_at`], which bind nothing).
    pub fn bound_port(&self) -> Option<u16> {
        self.state().port
    }

    /// Where clients connect, while running: `ws://127.0.0.1:PORT/` for the carrier's own
    /// listener, the URL given to [`Self::start_mounted_at`] for a mounted one (`None` after
    /// [`Self::start_mounted`]). The token is not in it (a URL ends up in logs): a client adds
    /// `?token=` with [`WsTransport::resolved_token`] or sends it in a header.
    pub fn url(&self) -> Option<String> {
        let st = self.state();
        if let Some(url) = &st.mounted_url {
            return Some(url.clone());
        }
        st.port.map(|port| format!("ws://127.0.0.1:{port}/"))
    }

    /// The token connections must present (configured or minted); `None` in open mode.
    pub fn resolved_token(&self) -> Option<&str> {
        self.token.as_ref().map(Token::expose)
    }

    /// Whether `start()` succeeded and `stop()` has not been called since.
    pub fn is_running(&self) -> bool {
        self.state().shutdown.is_some()
    }

    /// The configuration this transport was built with.
    pub fn config(&self) -> &CarrierConfig {
        &self.config
    }

    /// Counters behind `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// Declares a payload channel (before or after `start()`).
    pub fn register_channel(
        &self,
        descriptor: ChannelDescriptor,
    ) -> Result<ChannelHandle, ChannelError> {
        self.shared.registry.register(descriptor)
    }

    /// The channel registry (for hosts that route channels themselves).
    pub fn registry(&self) -> &ChannelRegistry {
        &self.shared.registry
    }

    /// A service to mount the carrier at any path of the host's own hyper/axum server, with the
    /// same admission (axum: `route_service("/agent", transport.service())` for the socket
    /// alone, `nest_service("/agent", transport.service())` for the socket and the console; see
    /// [`CarrierService`]). Upgrades it accepts are served only while the transport runs (after
    /// `attach()` and `start()`); use [`WsTransport::start_mounted`] to run without a listener.
    pub fn service(&self) -> CarrierService {
        CarrierService {
            shared: self.shared.clone(),
            mounted: true,
            peer: carrier_protocol::admission::Peer::Tcp,
        }
    }

    /// Starts without binding a listener, for hosts that only serve through [`Self::service`].
    /// There is no listener of the carrier's own (no port, no Unix socket), and the carrier
    /// does not know where the host serves it, so [`Self::url`] and [`Self::bound_port`] stay
    /// `None` and no runtime file is written: clients must be given the URL (the host's port
    /// and the mount path) and the token. A transport built
    /// [`with_runtime_file`](Self::with_runtime_file) fails here with
    /// [`LifecycleError::RuntimeFileNeedsUrl`]: use [`Self::start_mounted_at`].
    pub fn start_mounted(&self) -> Result<(), LifecycleError> {
        if self.runtime_file.is_some() {
            return Err(LifecycleError::RuntimeFileNeedsUrl);
        }
        self.run_mounted(None)
    }

    /// [`Self::start_mounted`] for a carrier the host serves at `url`, the WebSocket URL of its
    /// mount (`ws://127.0.0.1:PORT/PATH`: the port the host's server listens on, the path the
    /// service is mounted at). [`Self::url`] reports it, and a transport built
    /// [`with_runtime_file`](Self::with_runtime_file) advertises it there like a standalone
    /// carrier, so `carrier status`, `send`, `connect` and `pipe` find it without being given
    /// the URL (`carrier doctor` probes `PATH/healthz`). Bind the host's listener first, so the
    /// port is known:
    ///
    /// ```no_run
    /// # async fn demo(transport: carrier_server::WsTransport) -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let port = listener.local_addr()?.port();
    /// transport.start_mounted_at(&format!("ws://127.0.0.1:{port}/assist"))?;
    /// // … serve `transport.service()` at /assist of an axum or hyper server on `listener`.
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: not attached, already running, a URL a runtime file cannot list (another host
    /// than 127.0.0.1, a query, a fragment, credentials), a runtime file that cannot be written.
    pub fn start_mounted_at(&self, url: &str) -> Result<(), LifecycleError> {
        let mount_error = |reason: String| LifecycleError::MountUrl {
            url: carrier_protocol::envelope::truncate(url, 200).to_owned(),
            reason,
        };
        let port = url
            .strip_prefix("ws://127.0.0.1:")
            .and_then(|rest| rest.split('/').next())
            .and_then(|port| port.parse::<u16>().ok())
            .filter(|port| *port != 0)
            .ok_or_else(|| mount_error("does not start with ws://127.0.0.1:PORT".into()))?;
        let path = carrier_discovery::url_path(url, port).map_err(mount_error)?;
        self.run_mounted(Some((port, path)))
    }

    fn run_mounted(&self, at: Option<(u16, &str)>) -> Result<(), LifecycleError> {
        let mut st = self.state();
        if st.shutdown.is_some() {
            return Err(LifecycleError::AlreadyRunning);
        }
        let attachment = st.attachment.clone().ok_or(LifecycleError::NotAttached)?;
        let runtime_file = match (&self.runtime_file, at) {
            (Some(options), Some((port, path))) => {
                let token = (self.token.as_ref())
                    .filter(|_| options.include_token)
                    .map(|t| t.expose().to_owned());
                let entry = RuntimeEntry::for_this_process(port, self.config.role, token)
                    .at_path(path)
                    .map_err(|reason| LifecycleError::MountUrl {
                        url: path.to_owned(),
                        reason,
                    })?;
                let file = options.dir.publish(&entry)?;
                tracing::debug!(path = %file.path().display(), "runtime file written");
                Some(file)
            }
            (Some(_), None) => return Err(LifecycleError::RuntimeFileNeedsUrl),
            (None, _) => None,
        };
        *self
            .shared
            .running
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Running {
            attachment,
            ctx: self.context(mint_epoch()),
        });
        self.shared.stopping.store(false, Ordering::Release);
        let (tx, _rx) = watch::channel(false);
        st.shutdown = Some(tx);
        st.runtime_file = runtime_file;
        st.mounted_url = at.map(|(port, path)| format!("ws://127.0.0.1:{port}{path}"));
        tracing::info!(
            url = st.mounted_url.as_deref(),
            "carrier running, mounted in the host's server"
        );
        Ok(())
    }
}

impl WsTransport {
    /// Serves one connection over a byte stream that has already completed the WebSocket
    /// upgrade — a host that accepts and upgrades sockets itself, a test that injects faults
    /// under the writer, a fuzzer — through the same connection task as the carrier's own
    /// listener: the frame reader and reassembly, the attached profile, channel routing, the
    /// single writer. `verdict` stands in for admission, which the caller has done: a role to
    /// admit with, or a refusal that closes the connection with 1008 before any data frame
    /// ([`carrier_protocol::admission::admit`] decides both from an upgrade request).
    ///
    /// It takes a connection slot as an upgrade does (`max_connections`). `None` when the
    /// transport is not running or every slot is taken; otherwise a future that serves the
    /// connection and ends when the connection has ended.
    pub fn serve_upgraded<IO>(
        &self,
        io: IO,
        verdict: Result<carrier_protocol::Role, CloseRefusal>,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    {
        let running = self
            .shared
            .running
            .read()
            .map(|r| r.is_some())
            .unwrap_or(false);
        if !running {
            return None;
        }
        let slot = match verdict {
            Ok(_) => self.shared.reserve_slot()?,
            Err(_) => self.shared.reserve_refused(),
        };
        let shared = self.shared.clone();
        Some(async move {
            let _slot = slot;
            super::connection::run_io(io, verdict, super::connection::Linger::Grace, shared).await
        })
    }
}

impl Drop for WsTransport {
    fn drop(&mut self) {
        if let Some(tx) = self.state().shutdown.take() {
            let _ = tx.send(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random source that always fails, as `getrandom` does when the OS has none to give.
    struct BrokenRandom;

    impl rand::TryRngCore for BrokenRandom {
        type Error = std::io::Error;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Err(std::io::Error::other("getrandom: no entropy source"))
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Err(std::io::Error::other("getrandom: no entropy source"))
        }
        fn try_fill_bytes(&mut self, _dst: &mut [u8]) -> Result<(), Self::Error> {
            Err(std::io::Error::other("getrandom: no entropy source"))
        }
    }

    #[test]
    fn a_failing_random_source_refuses_to_start_rather_than_run_open() {
        let tokenless = CarrierConfig::default().with_port(0);
        match WsTransport::minting_from(tokenless.clone(), &mut BrokenRandom) {
            Err(ConfigError::RandomSource(msg)) => assert!(msg.contains("entropy"), "{msg}"),
            Err(other) => panic!("wrong error {other}"),
            Ok(t) => panic!(
                "started with token {:?} without randomness",
                t.resolved_token()
            ),
        }
        let err = WsTransport::minting_from(tokenless, &mut BrokenRandom)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("refusing to start"), "{err}");
        // Nothing to mint with a configured token or in open mode: the broken source is not used.
        let with_token = CarrierConfig::default()
            .with_port(0)
            .with_auth(Auth::Token("given".into()));
        let t = WsTransport::minting_from(with_token, &mut BrokenRandom).expect("token given");
        assert_eq!(t.resolved_token(), Some("given"));
        let open = CarrierConfig::default().with_port(0).with_auth(Auth::Open {
            reason: "test".into(),
        });
        let t = WsTransport::minting_from(open, &mut BrokenRandom).expect("open mode");
        assert_eq!(t.resolved_token(), None);
    }
}
