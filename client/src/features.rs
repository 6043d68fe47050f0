//! Local feature preflight: which methods need which protocol feature, and the
//! `unsupported_feature` error a request gets instead of being sent (docs/protocol.md, "Features").
//! The rule and the error are the protocol's ([`Peers::preflight`], the one the server answers
//! with); this module only names the feature a method needs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::ReceivedError;
use carrier_protocol::catalog::Method;
use carrier_protocol::features::{Feature, Peers};
use carrier_protocol::version::ProtocolVersion;

/// A protocol feature a method needs, and the protocol version that introduced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureRequirement {
    /// The feature's key in the handshake result's `features` map.
    pub feature: &'static str,
    /// The first protocol version that has it.
    pub since: &'static str,
}

/// The feature `method` needs, from the protocol's one method catalog
/// ([`carrier_protocol::catalog`]): the client and the server cannot disagree on names.
/// `usage.report` needs a feature per scope on top, which [`preflight`] reads from the params.
pub fn feature_for_method(method: &str) -> Option<FeatureRequirement> {
    let feature = method_feature(method)?;
    Some(FeatureRequirement {
        feature: feature.name(),
        since: feature.introduced_str(),
    })
}

fn method_feature(method: &str) -> Option<Feature> {
    Method::from_name(method)?.spec().feature
}

/// Whether a server that announced `features` at `server_protocol` lacks what `method` with
/// `params` needs (the catalog's feature, then its params' own: a `usage.report` scope), by
/// [`Peers::preflight_announced`]; the error is the one the server would answer with.
pub fn preflight(
    method: &str,
    params: &Value,
    server_protocol: ProtocolVersion,
    features: &BTreeMap<String, bool>,
) -> Option<ReceivedError> {
    let spec = Method::from_name(method)?.spec();
    [spec.feature, (spec.params_feature)(params)]
        .into_iter()
        .flatten()
        .find_map(|feature| Peers::preflight_announced(server_protocol, features, feature).err())
        .map(ReceivedError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EffectState, ErrorCode};
    use serde_json::json;

    fn features(entries: &[(&str, bool)]) -> BTreeMap<String, bool> {
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn v(s: &str) -> ProtocolVersion {
        s.parse().unwrap()
    }

    #[test]
    fn core_methods_never_need_a_feature() {
        for method in [
            "system.ping",
            "system.status",
            "session.submit",
            "session.history",
        ] {
            assert_eq!(
                preflight(method, &json!({}), v("1.0"), &features(&[])),
                None,
                "{method}"
            );
        }
    }

    #[test]
    fn a_feature_announced_false_is_refused_with_the_documented_data() {
        let error = preflight(
            "sessions.start",
            &json!({}),
            v("1.0"),
            &features(&[("sessions", false)]),
        )
        .unwrap();
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
        assert_eq!(
            preflight("sessions.list", &json!({}), v("1.0"), &features(&[])),
            None
        );
        assert!(preflight("sessions.list", &json!({}), v("0.9"), &features(&[])).is_some());
        assert_eq!(
            preflight(
                "sessions.list",
                &json!({}),
                v("0.9"),
                &features(&[("sessions", true)])
            ),
            None
        );
    }

    #[test]
    fn a_usage_scope_the_server_lacks_is_refused_locally() {
        let announced = features(&[("usage.session", true), ("usage.stored", false)]);
        let stored = preflight(
            "usage.report",
            &json!({"scope": "stored"}),
            v("1.0"),
            &announced,
        )
        .expect("refused");
        assert_eq!(stored.code, ErrorCode::UnsupportedFeature);
        assert_eq!(stored.data.unwrap()["feature"], "usage.stored");
        for params in [json!({}), json!({"scope": "session"})] {
            assert_eq!(
                preflight("usage.report", &params, v("1.0"), &announced),
                None,
                "{params}"
            );
        }
        // Params the server will refuse as invalid are left to it.
        assert_eq!(
            preflight("usage.report", &json!({"scope": 7}), v("1.0"), &announced),
            None
        );
    }
}
