//! [`SocketTables`]: the kernel's tables of TCP sockets (`/proc/net/tcp` and
//! `/proc/net/tcp6`, Linux), read for the uid that owns one connection's server side. What
//! that uid means for a dial is [`super::OwnerCheck`]'s business.

use std::io::BufRead as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where the kernel's TCP socket tables are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketTables {
    tcp: PathBuf,
    tcp6: PathBuf,
}

impl Default for SocketTables {
    fn default() -> Self {
        SocketTables::in_dir("/proc/net")
    }
}

impl SocketTables {
    /// `DIR/tcp` and `DIR/tcp6` (the system's are in `/proc/net`; tests point elsewhere).
    pub fn in_dir(dir: impl AsRef<Path>) -> SocketTables {
        SocketTables {
            tcp: dir.as_ref().join("tcp"),
            tcp6: dir.as_ref().join("tcp6"),
        }
    }

    /// The IPv4 table, which every system with these tables has.
    pub(super) fn ipv4(&self) -> &Path {
        &self.tcp
    }

    /// The uid owning the server side of the connection from `client` to `server`, `Ok(None)`
    /// when no table lists it. `tcp6` may be absent (a kernel without IPv6); `tcp` may not.
    pub fn server_side_owner(
        &self,
        server: SocketAddr,
        client: SocketAddr,
    ) -> Result<Option<u32>, String> {
        let wanted = (canonical(server), canonical(client));
        let tables: &[(&Path, bool)] = match server.ip() {
            IpAddr::V4(_) => &[(&self.tcp, true), (&self.tcp6, false)],
            IpAddr::V6(_) => &[(&self.tcp6, true)],
        };
        for &(path, required) in tables {
            let file = match std::fs::File::open(path) {
                Ok(file) => file,
                Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            };
            for line in std::io::BufReader::new(file).lines() {
                let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if let Some(uid) = server_side_uid(&line, wanted) {
                    return Ok(Some(uid));
                }
            }
        }
        Ok(None)
    }
}

/// An address with IPv4-mapped IPv6 written as IPv4, as a dual-stack listener's table entry
/// names an IPv4 peer.
fn canonical(addr: SocketAddr) -> (IpAddr, u16) {
    let ip = match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    (ip, addr.port())
}

/// The connection states of a server side that has not begun to close: `ESTABLISHED` (01) and
/// `SYN_RECV` (03, not yet accepted). A side already closing is not trusted: once the kernel
/// keeps it as a time-wait socket the table shows uid 0 for it, whoever owned it.
const OPEN_STATES: [&str; 2] = ["01", "03"];

/// The uid on a table line when it is the server side wanted: local address = the server,
/// remote address = the client, in an open state.
///
/// A line reads `sl local rem st tx:rx tr:when retrnsmt uid …`, each address `HEX:PORT` with
/// the IP as 32-bit words in the kernel's byte order and the port in hex.
fn server_side_uid(line: &str, wanted: ((IpAddr, u16), (IpAddr, u16))) -> Option<u32> {
    let fields: Vec<&str> = line.split_whitespace().take(8).collect();
    let [_, local, remote, state, _, _, _, uid] = fields.as_slice() else {
        return None;
    };
    if !OPEN_STATES.contains(state) {
        return None;
    }
    if parse_address(local)? != wanted.0 || parse_address(remote)? != wanted.1 {
        return None;
    }
    uid.parse().ok()
}

/// `0100007F:1F9E` → 127.0.0.1:8094; 32 hex digits for IPv6 (IPv4-mapped made IPv4).
fn parse_address(text: &str) -> Option<(IpAddr, u16)> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words = (0..ip.len() / 8)
        .map(|i| {
            let word = ip.get(i * 8..i * 8 + 8)?;
            // The kernel prints each 32-bit word of the address as a number in its own byte
            // order; the bytes in memory are the address in network order.
            u32::from_str_radix(word, 16).ok().map(u32::to_ne_bytes)
        })
        .collect::<Option<Vec<[u8; 4]>>>()?;
    let ip = match (ip.len(), words.as_slice()) {
        (8, [word]) => IpAddr::V4(Ipv4Addr::from(*word)),
        (32, [a, b, c, d]) => {
            let mut octets = [0u8; 16];
            for (chunk, word) in octets.chunks_exact_mut(4).zip([a, b, c, d]) {
                chunk.copy_from_slice(word);
            }
            let v6 = Ipv6Addr::from(octets);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some((ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(ip: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip))
    }

    #[test]
    fn addresses_parse_in_the_kernel_s_word_order() {
        let v4 = format!("{}:1F9E", word([127, 0, 0, 1]));
        assert_eq!(
            parse_address(&v4),
            Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 8094))
        );
        let v6_loopback = format!(
            "{}{}{}{}:0050",
            word([0; 4]),
            word([0; 4]),
            word([0; 4]),
            word([0, 0, 0, 1])
        );
        assert_eq!(
            parse_address(&v6_loopback),
            Some((IpAddr::V6(Ipv6Addr::LOCALHOST), 80))
        );
        let mapped = format!(
            "{}{}{}{}:0050",
            word([0; 4]),
            word([0; 4]),
            word([0, 0, 0xFF, 0xFF]),
            word([127, 0, 0, 1])
        );
        assert_eq!(
            parse_address(&mapped),
            Some((IpAddr::V4(Ipv4Addr::LOCALHOST), 80))
        );
        for bad in [
            "",
            "0100007F",
            "0100007F:",
            "XYZ00000:0050",
            "0100:0050",
            "0100007F:10000",
        ] {
            assert_eq!(parse_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_the_open_server_side_of_the_exact_connection_counts() {
        let server = (IpAddr::V4(Ipv4Addr::LOCALHOST), 0xA035);
        let client = (IpAddr::V4(Ipv4Addr::LOCALHOST), 0xA016);
        let line = |local: u16, remote: u16, state: &str, uid: u32| {
            let lo = word([127, 0, 0, 1]);
            format!(
                "   2: {lo}:{local:04X} {lo}:{remote:04X} {state} 00000000:00000000 00:00000000 00000000 {uid:>5}        0 0 1 0000000000000000 20 0 0 10 -1"
            )
        };
        let wanted = (server, client);
        assert_eq!(
            server_side_uid(&line(0xA035, 0xA016, "01", 65534), wanted),
            Some(65534)
        );
        assert_eq!(
            server_side_uid(&line(0xA035, 0xA016, "03", 1000), wanted),
            Some(1000)
        );
        // Our own side of the connection, the listener itself, another client, a closing side.
        assert_eq!(
            server_side_uid(&line(0xA016, 0xA035, "01", 0), wanted),
            None
        );
        assert_eq!(server_side_uid(&line(0xA035, 0, "0A", 65534), wanted), None);
        assert_eq!(
            server_side_uid(&line(0xA035, 0xA017, "01", 65534), wanted),
            None
        );
        assert_eq!(
            server_side_uid(&line(0xA035, 0xA016, "06", 0), wanted),
            None
        );
        assert_eq!(
            server_side_uid("  sl  local_address rem_address   st", wanted),
            None
        );
    }
}
