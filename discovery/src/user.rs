//! Local users: who this process runs as, and a name for a uid.

use std::fmt;

/// A local user: the uid, and its name when the system's user database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The numeric user id.
    pub uid: u32,
    /// The login name, if the uid has one.
    pub name: Option<String>,
}

impl User {
    /// The user with this uid, named from the user database (`getpwuid_r`, so NSS sources such
    /// as LDAP count too).
    pub fn by_uid(uid: u32) -> User {
        User {
            uid,
            name: user_name(uid),
        }
    }
}

impl fmt::Display for User {
    /// `uid 65534 (nobody)`, or `uid 1234` for a uid without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "uid {} ({name})", self.uid),
            None => write!(f, "uid {}", self.uid),
        }
    }
}

/// The real uid: whose runtime directory this is.
#[cfg(unix)]
pub(crate) fn real_uid() -> u32 {
    // SAFETY: getuid(2) has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(not(unix))]
pub(crate) fn real_uid() -> u32 {
    0
}

/// The effective uid: the owner of every socket this process opens, so the user a listener must
/// belong to before a token goes to it.
#[cfg(unix)]
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
pub(crate) fn effective_uid() -> u32 {
    0
}

/// The largest buffer offered to `getpwuid_r`; an entry needing more is left unnamed.
#[cfg(unix)]
const MAX_PASSWD_BUFFER: usize = 1 << 20;

/// The login name of `uid`. `getpwuid_r` rather than reading `/etc/passwd`: users may come from
/// NSS (LDAP, systemd-homed), which only the C library reaches; that is the reason for the
/// `unsafe` below.
#[cfg(unix)]
fn user_name(uid: u32) -> Option<String> {
    let mut buffer = vec![0u8; 1024];
    loop {
        // SAFETY: `passwd` is a plain C struct of integers and pointers, for which all-zero
        // bytes are a valid value; getpwuid_r overwrites it before we read it.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `entry` and `found` are live locals, and
        // `buffer` is `buffer.len()` writable bytes. getpwuid_r writes the strings `entry`
        // points to into `buffer`, which outlives their use below.
        let code = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut found,
            )
        };
        if code == libc::ERANGE && buffer.len() < MAX_PASSWD_BUFFER {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        if code != 0 || found.is_null() || entry.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` points to a NUL-terminated string inside `buffer`.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

#[cfg(not(unix))]
fn user_name(_uid: u32) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_read_as_uid_and_name() {
        let named = User {
            uid: 65534,
            name: Some("nobody".into()),
        };
        assert_eq!(named.to_string(), "uid 65534 (nobody)");
        let bare = User {
            uid: 4242,
            name: None,
        };
        assert_eq!(bare.to_string(), "uid 4242");
    }

    #[cfg(unix)]
    #[test]
    fn root_is_named_and_an_unknown_uid_is_not() {
        assert_eq!(User::by_uid(0).name.as_deref(), Some("root"));
        assert_eq!(User::by_uid(3_999_999_999).name, None);
    }
}
