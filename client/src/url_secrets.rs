//! The secrets a URL may carry — a `token` query parameter, `user:password@` — taken out before
//! the URL is dialled or shown.
//!
//! A token written into the URL is still the token: it goes only where the owner check lets a
//! token go (never to another user's listener, even with `any_owner`), and the URL shown in an
//! error, a warning or a log line never carries it. carrier has no use for `user:password@`
//! (the HTTP client would send it in the `Host` header); a URL with it is refused before
//! anything is dialled.

use percent_encoding::percent_decode_str;

/// What stands in a shown URL for a secret.
const REDACTED: &str = "<redacted>";

/// `url` without its `token` query parameters, and the first one's value (percent-decoded, `+`
/// read as a space, as the server reads it). Every other part of the URL is left as written;
/// a URL without a token comes back unchanged.
///
/// ```
/// use carrier_client::split_url_token;
///
/// let (url, token) = split_url_token("ws://127.0.0.1:7070/?role=observe&token=s3cret");
/// assert_eq!(url, "ws://127.0.0.1:7070/?role=observe");
/// assert_eq!(token.as_deref(), Some("s3cret"));
/// ```
pub fn split_url_token(url: &str) -> (String, Option<String>) {
    let (head, fragment) = split_fragment(url);
    let Some((base, query)) = head.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut token = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if decode(key) == "token" {
            token.get_or_insert_with(|| decode(value));
        } else {
            kept.push(pair);
        }
    }
    if token.is_none() {
        return (url.to_owned(), None);
    }
    let mut clean = base.to_owned();
    if kept.iter().any(|pair| !pair.is_empty()) {
        clean.push('?');
        clean.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        clean.push('#');
        clean.push_str(fragment);
    }
    (clean, token)
}

/// `url` as it may be shown: the value of every `token` query parameter, any
/// `user:password@`, and the fragment (where the console's links carry a token) replaced by
/// `<redacted>`.
///
/// ```
/// use carrier_client::redact_url;
///
/// assert_eq!(
///     redact_url("ws://me:pw@127.0.0.1:7070/?token=s3cret&role=observe"),
///     "ws://<redacted>@127.0.0.1:7070/?token=<redacted>&role=observe"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let (head, fragment) = split_fragment(url);
    let (before_query, query) = match head.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (head, None),
    };
    let mut shown = match userinfo_span(before_query) {
        Some((start, end)) => format!(
            "{}{REDACTED}{}",
            &before_query[..start],
            &before_query[end..]
        ),
        None => before_query.to_owned(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if decode(key) == "token" => format!("{key}={REDACTED}"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    if fragment.is_some() {
        shown.push('#');
        shown.push_str(REDACTED);
    }
    shown
}

/// Whether `url` names a user (and perhaps a password) before its host.
pub(crate) fn has_userinfo(url: &str) -> bool {
    let (head, _) = split_fragment(url);
    let before_query = head.split_once('?').map_or(head, |(before, _)| before);
    userinfo_span(before_query).is_some()
}

/// Where `user:password` is in a URL without query or fragment: from after `scheme://` to
/// before the last `@` of the authority.
fn userinfo_span(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..].find('/').map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')?;
    Some((start, start + at))
}

fn split_fragment(url: &str) -> (&str, Option<&str>) {
    match url.split_once('#') {
        Some((head, fragment)) => (head, Some(fragment)),
        None => (url, None),
    }
}

/// A query component as the server reads it.
fn decode(component: &str) -> String {
    percent_decode_str(&component.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_leaves_the_query_and_the_rest_stays_as_written() {
        assert_eq!(
            split_url_token("ws://127.0.0.1:1/"),
            ("ws://127.0.0.1:1/".to_owned(), None)
        );
        assert_eq!(
            split_url_token("ws://127.0.0.1:1/x?a=1&b"),
            ("ws://127.0.0.1:1/x?a=1&b".to_owned(), None)
        );
        assert_eq!(
            split_url_token("ws://127.0.0.1:1/?token=a%20b+c"),
            ("ws://127.0.0.1:1/".to_owned(), Some("a b c".to_owned()))
        );
        // Every `token` goes, however it is spelled; the first one counts, as on the server.
        assert_eq!(
            split_url_token("ws://127.0.0.1:1/p?a=1&%74oken=one&token=two&role=observe#f"),
            (
                "ws://127.0.0.1:1/p?a=1&role=observe#f".to_owned(),
                Some("one".to_owned())
            )
        );
        assert_eq!(
            split_url_token("ws://127.0.0.1:1/?token"),
            ("ws://127.0.0.1:1/".to_owned(), Some(String::new()))
        );
    }

    #[test]
    fn a_shown_url_carries_no_secret() {
        assert_eq!(redact_url("ws://127.0.0.1:1/x"), "ws://127.0.0.1:1/x");
        assert_eq!(
            redact_url("ws://u@127.0.0.1:1?a=1&%74oken=s#token=t"),
            "ws://<redacted>@127.0.0.1:1?a=1&%74oken=<redacted>#<redacted>"
        );
        assert_eq!(
            redact_url("ws://u:p@w@[::1]:1/a@b?token=s"),
            "ws://<redacted>@[::1]:1/a@b?token=<redacted>"
        );
        assert!(has_userinfo("ws://u:p@127.0.0.1:1/"));
        assert!(has_userinfo("ws://@127.0.0.1:1/"));
        assert!(!has_userinfo("ws://127.0.0.1:1/a@b?c=@#@"));
    }
}
