//! The one egress policy in front of every outbound connection the
//! platform makes for a tenant: upstream MCP servers and webhook
//! receivers alike.
//!
//! A tenant admin chooses these URLs, and the platform's network position
//! is not theirs: by default no connection goes to loopback, private,
//! link-local, carrier-grade NAT, unique-local, unspecified, multicast,
//! broadcast, reserved or cloud metadata addresses ([`Rule`]), IPv4
//! embedded in IPv6 judged by its IPv4. The operator opens what a
//! deployment needs with an [`AllowList`] (`egress_allow`: host names,
//! `*.` suffixes, addresses and CIDRs). Its address ranges ([`Cidr`],
//! matched strictly) also parse lists of peers (`trusted_proxies`).
//!
//! Three places enforce it, so no spelling and no DNS answer gets past:
//!
//! - [`EgressPolicy::check_url`] parses a URL once with the parser the
//!   HTTP client itself uses (`reqwest::Url`, WHATWG rules: `2130706433`,
//!   `0x7f000001`, `0177.0.0.1`, `127.1`, `0` and backslashes all
//!   normalize), judges a literal address at once (the client never
//!   resolves those) and hands back the parsed URL to send to;
//! - [`EgressPolicy::client_builder`]'s resolver ([`resolve`]) resolves a
//!   name, drops every address the policy refuses and gives the client only
//!   the rest, so the address checked is the address connected to (no
//!   second lookup for DNS rebinding to switch);
//! - the same client follows no redirect and uses no proxy from the
//!   environment (either would connect somewhere not checked).
//!
//! Every refusal is a [`Refusal`] naming the rule and the setting that
//! would open it; [`refusal_in`] finds one inside an HTTP client error.
//!
//! In detail: The one egress policy in front of every connection made for a
//! tenant (upstream MCP servers, webhook receivers): the default-refused
//! address classes (`rules.rs`: loopback, private, link-local, carrier-grade
//! NAT, unique-local, unspecified, multicast, broadcast, reserved, cloud
//! metadata; IPv4 inside IPv6 judged by its IPv4), the operator's allow-list
//! (`allow.rs`: names, `*.` suffixes, addresses, CIDRs; `egress_allow`),
//! `EgressPolicy::check_url` (parsed once with reqwest's own WHATWG parser,
//! literal addresses judged before any request) and the HTTP client builder
//! whose resolver (`resolve.rs`) hands the connector only allowed addresses (no
//! second lookup), with no redirects and no proxy; every refusal a `Refusal`
//! naming its rule. A leaf crate so both `upstream` and `server` use the same
//! policy.

mod allow;
mod error;
mod policy;
pub mod resolve;
mod rules;

pub use allow::{AllowList, Cidr};
pub use error::{EgressError, Refusal};
pub use policy::{EgressPolicy, refusal_in};
pub use rules::{Rule, classify};

/// The setting that opens addresses and names for every egress.
pub const SETTING: &str = "egress_allow";
