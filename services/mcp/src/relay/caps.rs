//! What the agent declared it can answer, read once from its
//! `ClientCapabilities` (the `initialize` params of a 2025 session, or the
//! `_meta` `io.modelcontextprotocol/clientCapabilities` of the 2026-07-28
//! request that caused the relay).
//!
//! A capability counts as declared when its member is a JSON object, as
//! the schemas type them. Era rules: `sampling.tools` exists from
//! 2025-11-25; before 2025-11-25 `elicitation` means form mode (there is
//! no other), and from 2025-11-25 an empty `elicitation: {}` still means
//! form mode only, while `{"url": {}}` alone means URL mode only.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::revision::Revision;

/// The agent's declared client capabilities, as far as relaying needs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentCapabilities {
    pub sampling: bool,
    /// `sampling.tools` (2025-11-25 and later).
    pub sampling_tools: bool,
    /// `sampling.context`: the agent includes context its sessions hold
    /// when a request asks (`includeContext`).
    pub sampling_context: bool,
    pub elicitation_form: bool,
    /// `elicitation.url` (2025-11-25 and later).
    pub elicitation_url: bool,
    pub roots: bool,
}

impl AgentCapabilities {
    /// Reads the declared capabilities of an agent speaking `revision`.
    /// Anything that is not an object declares nothing.
    pub fn from_declared(revision: Revision, capabilities: &Value) -> Self {
        let member = |key: &str| capabilities.get(key).and_then(Value::as_object);
        let sampling = member("sampling");
        let elicitation = member("elicitation");
        let modes = revision.has_elicitation_modes();
        let (form, url) = match elicitation {
            None => (false, false),
            Some(_) if !modes => (true, false),
            Some(e) => {
                let form = e.get("form").is_some_and(Value::is_object);
                let url = e.get("url").is_some_and(Value::is_object);
                // An empty object, or one naming neither mode, is form
                // mode (2025-11-25 client/elicitation, backwards
                // compatibility).
                (form || !url, url)
            }
        };
        Self {
            sampling: sampling.is_some(),
            sampling_tools: revision.has_sampling_tools()
                && sampling.is_some_and(|s| s.get("tools").is_some_and(Value::is_object)),
            sampling_context: sampling
                .is_some_and(|s| s.get("context").is_some_and(Value::is_object)),
            elicitation_form: form && revision.has_elicitation(),
            elicitation_url: url,
            roots: member("roots").is_some(),
        }
    }

    /// The capabilities as one byte, for a legacy session id (which must
    /// stay self-contained: any replica relays within the session).
    pub fn to_bits(self) -> u8 {
        u8::from(self.sampling)
            | u8::from(self.sampling_tools) << 1
            | u8::from(self.elicitation_form) << 2
            | u8::from(self.elicitation_url) << 3
            | u8::from(self.roots) << 4
            | u8::from(self.sampling_context) << 5
    }

    /// The inverse of [`Self::to_bits`]; unknown bits declare nothing.
    pub fn from_bits(bits: u8) -> Self {
        Self {
            sampling: bits & 1 != 0,
            sampling_tools: bits & 2 != 0,
            elicitation_form: bits & 4 != 0,
            elicitation_url: bits & 8 != 0,
            roots: bits & 16 != 0,
            sampling_context: bits & 32 != 0,
        }
    }

    /// Whether the agent can answer any relayed request at all.
    pub fn any(self) -> bool {
        self.to_bits() != 0
    }

    /// The `ClientCapabilities` a gateway declares to an upstream speaking
    /// `upstream` on behalf of this agent: what the agent declared, as far
    /// as the upstream's revision can say it, and never more (no
    /// `roots.listChanged`: the gateway relays no notifications).
    pub fn declared_to(self, upstream: Revision) -> Value {
        let mut caps = serde_json::Map::new();
        if self.sampling {
            let mut sampling = serde_json::Map::new();
            if self.sampling_tools && upstream.has_sampling_tools() {
                sampling.insert("tools".into(), Value::Object(Default::default()));
            }
            if self.sampling_context {
                sampling.insert("context".into(), Value::Object(Default::default()));
            }
            caps.insert("sampling".into(), Value::Object(sampling));
        }
        if upstream.has_elicitation() && (self.elicitation_form || self.elicitation_url) {
            let mut elicitation = serde_json::Map::new();
            if upstream.has_elicitation_modes() {
                if self.elicitation_form {
                    elicitation.insert("form".into(), Value::Object(Default::default()));
                }
                if self.elicitation_url {
                    elicitation.insert("url".into(), Value::Object(Default::default()));
                }
                caps.insert("elicitation".into(), Value::Object(elicitation));
            } else if self.elicitation_form {
                caps.insert("elicitation".into(), Value::Object(elicitation));
            }
        }
        if self.roots {
            caps.insert("roots".into(), Value::Object(Default::default()));
        }
        Value::Object(caps)
    }

    /// [`Self::from_declared`] from the raw JSON; unparsable declares
    /// nothing.
    pub fn from_raw(revision: Revision, capabilities: &RawValue) -> Self {
        serde_json::from_str::<Value>(capabilities.get())
            .map(|caps| Self::from_declared(revision, &caps))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn declared_capabilities_per_era() {
        let all = json!({"sampling": {"tools": {}}, "elicitation": {"url": {}}, "roots": {}});
        let legacy = AgentCapabilities::from_declared(Revision::V2025_06_18, &all);
        assert!(legacy.sampling && !legacy.sampling_tools);
        assert!(legacy.elicitation_form && !legacy.elicitation_url);
        assert!(legacy.roots);
        let modern = AgentCapabilities::from_declared(Revision::V2025_11_25, &all);
        assert!(modern.sampling_tools && modern.elicitation_url && !modern.elicitation_form);
        let empty =
            AgentCapabilities::from_declared(Revision::V2026_07_28, &json!({"elicitation": {}}));
        assert!(empty.elicitation_form && !empty.elicitation_url && !empty.sampling);
        let none = AgentCapabilities::from_declared(
            Revision::V2025_03_26,
            &json!({"elicitation": {}, "sampling": true}),
        );
        assert_eq!(
            none,
            AgentCapabilities::default(),
            "no elicitation before 2025-06-18; `true` is not an object"
        );
    }

    #[test]
    fn bits_round_trip_and_declarations_never_exceed_the_agent() {
        let all =
            json!({"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}, "roots": {}});
        let caps = AgentCapabilities::from_declared(Revision::V2025_11_25, &all);
        assert_eq!(AgentCapabilities::from_bits(caps.to_bits()), caps);
        assert_eq!(
            caps.declared_to(Revision::V2025_11_25),
            json!({"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}, "roots": {}})
        );
        assert_eq!(
            caps.declared_to(Revision::V2025_06_18),
            json!({"sampling": {}, "elicitation": {}, "roots": {}}),
            "what the older upstream revision can say"
        );
        let sampling_only =
            AgentCapabilities::from_declared(Revision::V2025_06_18, &json!({"sampling": {}}));
        assert_eq!(
            sampling_only.declared_to(Revision::V2025_11_25),
            json!({"sampling": {}})
        );
        assert_eq!(
            AgentCapabilities::default().declared_to(Revision::V2025_11_25),
            json!({})
        );
    }
}
