//! What the policy refuses, and why.

use crate::rules::Rule;
use std::fmt;
use std::net::IpAddr;

/// How the refused address was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Via {
    /// The URL named the address itself (in any spelling).
    Literal,
    /// A name that is loopback by definition (`localhost`).
    Name,
    /// The URL's name resolved to this address.
    Resolved(IpAddr),
}

/// One refused connection: what the URL named, the address and the rule.
/// Its text names the rule and how to open it, never a URL's path or
/// query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    host: String,
    via: Via,
    rule: Rule,
}

impl Refusal {
    /// A literal address (as the URL parser normalized it).
    pub(crate) fn literal(ip: IpAddr, rule: Rule) -> Self {
        Self {
            host: ip.to_string(),
            via: Via::Literal,
            rule,
        }
    }

    pub(crate) fn name(host: &str, rule: Rule) -> Self {
        Self {
            host: host.to_owned(),
            via: Via::Name,
            rule,
        }
    }

    pub(crate) fn resolved(host: &str, ip: IpAddr, rule: Rule) -> Self {
        Self {
            host: host.to_owned(),
            via: Via::Resolved(ip),
            rule,
        }
    }

    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// The host as the URL parser wrote it.
    pub fn host(&self) -> &str {
        &self.host
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (host, rule, setting) = (&self.host, self.rule, crate::SETTING);
        match &self.via {
            Via::Literal | Via::Name => write!(f, "egress refused: {host} is {rule}")?,
            Via::Resolved(ip) => write!(
                f,
                "egress refused: {host} resolves to {ip}, which is {rule}"
            )?,
        }
        write!(f, " (allow it with {setting} = [\"{host}\"])")
    }
}

impl std::error::Error for Refusal {}

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// Not a URL the HTTP client would send to.
    #[error("{0}")]
    Url(String),
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// An allow-list entry that is none of its forms.
    #[error("allow-list entry `{entry}`: {why}")]
    Entry { entry: String, why: String },
}
