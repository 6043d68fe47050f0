//! A channel as a client reads it from the handshake result (or `channels.list`): the
//! descriptor's wire fields, read tolerantly, with the inbound `credit` of a bulk channel that
//! protocol 1.1 (`bulk_credit`) adds.

use serde::{Deserialize, Deserializer, Serialize};

use crate::channel::{ChannelDirection, DeliveryClass};

/// One declared channel as the server describes it to a client.
/// It serializes back to the descriptor's wire shape (`credit` only when there is some).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChannelInfo {
    /// The channel's name.
    pub name: String,
    /// The event names it carries; `["*"]` declares any event.
    #[serde(default)]
    pub events: Vec<String>,
    /// Whether it accepts opaque binary frames.
    #[serde(default)]
    pub binary: bool,
    /// Its outbound delivery class; a class this build does not know reads as `None`.
    #[serde(default = "reliable", deserialize_with = "lenient_delivery")]
    pub delivery: Option<DeliveryClass>,
    /// For a bulk channel on a server with `bulk_credit`: the bytes of frame bodies this
    /// connection may send on it before it hears `channel.credit`. `None` from a 1.0 server:
    /// no credit is counted (nor is it where the handshake's `features` lack `bulk_credit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit: Option<u64>,
    /// Who may send on it; absent means both ways. A direction this build does not know reads
    /// as `None`, and a client sends nothing on such a channel.
    #[serde(
        default = "both_ways",
        deserialize_with = "lenient_direction",
        skip_serializing_if = "is_both_ways"
    )]
    pub direction: Option<ChannelDirection>,
}

impl ChannelInfo {
    /// Whether `event` is declared on the channel.
    pub fn declares(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }

    /// Whether this client may send on it: the channel takes frames both ways.
    pub fn clients_send(&self) -> bool {
        self.direction.is_some_and(ChannelDirection::clients_send)
    }

    /// Whether it is a bulk channel.
    pub fn is_bulk(&self) -> bool {
        self.delivery == Some(DeliveryClass::Bulk)
    }
}

fn reliable() -> Option<DeliveryClass> {
    Some(DeliveryClass::Reliable)
}

fn both_ways() -> Option<ChannelDirection> {
    Some(ChannelDirection::Both)
}

fn is_both_ways(direction: &Option<ChannelDirection>) -> bool {
    *direction == Some(ChannelDirection::Both)
}

fn lenient_direction<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ChannelDirection>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

fn lenient_delivery<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<DeliveryClass>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn descriptors_are_read_tolerantly() {
        let bulk: ChannelInfo = serde_json::from_value(json!({
            "name": "e", "events": ["*"], "binary": true, "delivery": "bulk", "credit": 1048576
        }))
        .unwrap();
        assert!(bulk.is_bulk() && bulk.declares("x") && bulk.binary);
        assert_eq!(bulk.credit, Some(1 << 20));
        let old: ChannelInfo = serde_json::from_value(json!({"name": "m"})).unwrap();
        assert_eq!(old.delivery, Some(DeliveryClass::Reliable));
        assert_eq!(old.credit, None);
        assert!(!old.binary && !old.declares("x"));
        let future: ChannelInfo =
            serde_json::from_value(json!({"name": "f", "delivery": "teleport"})).unwrap();
        assert_eq!(future.delivery, None);
        assert!(old.clients_send() && future.clients_send());
    }

    #[test]
    fn a_host_only_channel_is_not_for_clients_to_send_on() {
        let read_only: ChannelInfo =
            serde_json::from_value(json!({"name": "d", "direction": "host_to_clients"})).unwrap();
        assert_eq!(read_only.direction, Some(ChannelDirection::HostToClients));
        assert!(!read_only.clients_send());
        // A direction from a newer server is not guessed at: nothing is sent on it.
        let unknown: ChannelInfo =
            serde_json::from_value(json!({"name": "u", "direction": "sideways"})).unwrap();
        assert_eq!(unknown.direction, None);
        assert!(!unknown.clients_send());
        assert_eq!(
            serde_json::to_value(&read_only).unwrap()["direction"],
            "host_to_clients"
        );
    }
}
