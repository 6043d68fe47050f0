//! The web console page and the JavaScript client modules it imports, as the carrier serves
//! them (`GET /console`, `GET /client.js`, …): the agent protocol's web client, handed to the
//! server by the agent profile. The modules are the npm package `carrier-client` (this crate's
//! folder), file by file with no build step: `client.js` is its browser entry (it re-exports
//! the whole public API) and imports the others by relative path, so a page resolves them all
//! against the directory the carrier is served from.

/// The web console (`/console`): one page that connects to the socket beside it.
pub const CONSOLE_HTML: &str = include_str!("../console.html");

/// Each module the console imports, by file name, `client.js` first.
pub const CLIENT_MODULES: &[(&str, &str)] = &[
    ("client.js", include_str!("../client.js")),
    ("transport.js", include_str!("../transport.js")),
    ("frames.js", include_str!("../frames.js")),
    ("errors.js", include_str!("../errors.js")),
    ("internal.js", include_str!("../internal.js")),
    ("catalog.js", include_str!("../catalog.js")),
    ("connection.js", include_str!("../connection.js")),
    ("versions.js", include_str!("../versions.js")),
    ("requests.js", include_str!("../requests.js")),
    ("preflight.js", include_str!("../preflight.js")),
    ("resume.js", include_str!("../resume.js")),
    ("channels.js", include_str!("../channels.js")),
    ("credit.js", include_str!("../credit.js")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_client_imports_is_served() {
        for (file, source) in CLIENT_MODULES {
            for line in source.lines() {
                let Some(import) = line
                    .split_once("from \"./")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(name, _)| name)
                else {
                    continue;
                };
                assert!(
                    CLIENT_MODULES.iter().any(|(name, _)| *name == import),
                    "{file} imports ./{import}, which is not served"
                );
            }
        }
        assert!(CONSOLE_HTML.contains(r#"from "./client.js""#));
    }
}
