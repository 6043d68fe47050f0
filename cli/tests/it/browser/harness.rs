//! What the browser test stands on: the real `carrier serve` process, a foreign web server, and
//! headless Debian Chromium driven over the Chrome DevTools Protocol (CDP).
//!
//! Why CDP over the browser's own `--remote-debugging-port` WebSocket rather than chromedriver
//! (WebDriver) with `fantoccini`: it is one process instead of two (no driver whose version must
//! match the browser's, no second port to wait for), it needs no new client crate (the socket is
//! `tokio-tungstenite`, already the tests' independent client), and it gives directly what
//! WebDriver only has through extensions: page console and exceptions for failure messages,
//! `DOM.setFileInputFiles`, screenshots, and the browser's own record of a WebSocket handshake
//! (the Origin it sent, the status it got back).
//!
//! Every process here is owned by a guard whose `Drop` kills it, so a failing test leaves
//! nothing running.

mod carrier;
mod cdp;
mod chromium;
mod foreign_site;
mod page;
mod wait;

pub(crate) use carrier::Carrier;
pub(crate) use chromium::Chromium;
pub(crate) use foreign_site::ForeignSite;
pub(crate) use page::Page;
