//! Local feature preflight: which methods need which protocol feature, and the
//! `unsupported_feature` error a request gets instead of being sent (SPEC sections 4 and 6).

use serde_json::json;

use super::error::{EffectState, ErrorCode, WireError};
use super::version::ProtocolVersion;

/// A protocol feature a method needs, and the protocol version that introduced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureRequirement {
    /// The feature's key in the handshake result's `features` map.
    pub feature: &'static str,
    /// The first protocol version that has it.
    pub since: &'static str,
}

/// The feature `method` needs, from the protocol's one method catalog
/// ([`crate::protocol::catalog`]): the client and the server cannot disagree on names.
/// `usage.report` needs a feature per scope, which the server checks; the client does not
/// preflight it.
pub fn feature_for_method(method: &str) -> Option<FeatureRequirement> {
    let feature = crate::protocol::catalog::Method::from_name(method)?
        .spec()
        .feature?;
    Some(FeatureRequirement {
        feature: feature.name(),
        since: feature.introduced_str(),
    })
}

/// Whether a server that announced `features` at `server_protocol` lacks what `method` needs.
///
/// A feature the server announces as `false` is missing. A feature it does not mention is
/// missing only when its protocol version predates the feature: an older server cannot know a
/// newer feature's name, while a current one may simply not list features it always has.
pub fn preflight(
    method: &str,
    server_protocol: &str,
    features: &std::collections::BTreeMap<String, bool>,
) -> Option<WireError> {
    let requirement = feature_for_method(method)?;
    let missing = match features.get(requirement.feature) {
        Some(available) => !available,
        None => match (
            ProtocolVersion::parse(server_protocol),
            ProtocolVersion::parse(requirement.since),
        ) {
            (Some(actual), Some(needed)) => actual < needed,
            _ => false,
        },
    };
    if !missing {
        return None;
    }
    let recovery = format!(
        "update the carrier server to protocol {} or newer, or enable `{}` on it",
        requirement.since, requirement.feature
    );
    Some(WireError {
        code: ErrorCode::UnsupportedFeature,
        message: format!(
            "the server (protocol {server_protocol}) does not offer `{}`, which `{method}` needs",
            requirement.feature
        ),
        effect_state: Some(EffectState::None),
        data: Some(json!({
            "feature": requirement.feature,
            "component": "server",
            "required_protocol": requirement.since,
            "actual_protocol": server_protocol,
            "recovery": recovery,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn features(entries: &[(&str, bool)]) -> BTreeMap<String, bool> {
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn core_methods_never_need_a_feature() {
        for method in [
            "system.ping",
            "system.status",
            "session.submit",
            "session.history",
        ] {
            assert_eq!(preflight(method, "1.0", &features(&[])), None, "{method}");
        }
    }

    #[test]
    fn a_feature_announced_false_is_refused_with_the_documented_data() {
        let error = preflight("sessions.start", "1.0", &features(&[("sessions", false)])).unwrap();
        assert_eq!(error.code, ErrorCode::UnsupportedFeature);
        assert_eq!(error.effect_state, Some(EffectState::None));
        let data = error.data.unwrap();
        assert_eq!(data["feature"], "sessions");
        assert_eq!(data["component"], "server");
        assert_eq!(data["required_protocol"], "1.0");
        assert_eq!(data["actual_protocol"], "1.0");
        assert!(data["recovery"].as_str().unwrap().contains("update"));
    }

    #[test]
    fn an_unlisted_feature_counts_as_present_unless_the_server_predates_it() {
        assert_eq!(preflight("sessions.list", "1.0", &features(&[])), None);
        assert!(preflight("sessions.list", "0.9", &features(&[])).is_some());
        assert_eq!(
            preflight("sessions.list", "0.9", &features(&[("sessions", true)])),
            None
        );
    }
}
