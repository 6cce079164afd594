//! [`EgressPolicy`]: the default rules plus the operator's allow-list,
//! applied to a URL before a request and to every address at connect time.

use crate::allow::AllowList;
use crate::error::{EgressError, Refusal};
use crate::rules::{Rule, classify};
use reqwest::Url;
use std::net::IpAddr;
use std::sync::Arc;

/// A URL's host as the parser wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host<'a> {
    Domain(&'a str),
    Ip(IpAddr),
}

/// `url`'s host: an address (IPv6 without its brackets) or a name.
pub(crate) fn host_of(url: &Url) -> Option<Host<'_>> {
    let host = url.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Some(match bare.parse::<IpAddr>() {
        Ok(ip) => Host::Ip(ip),
        Err(_) => Host::Domain(host),
    })
}

/// See the crate docs. [`Default`] refuses every [`Rule`] and opens
/// nothing.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    allow: AllowList,
}

impl EgressPolicy {
    pub fn new(allow: AllowList) -> Self {
        Self { allow }
    }

    /// Parses `egress_allow`'s entries.
    pub fn from_entries<S: AsRef<str>>(entries: &[S]) -> Result<Self, EgressError> {
        AllowList::parse(entries).map(Self::new)
    }

    pub fn allow(&self) -> &AllowList {
        &self.allow
    }

    /// This policy with `more` opened too.
    pub fn opening(&self, more: &AllowList) -> Self {
        Self::new(self.allow.union(more))
    }

    /// Parses `text` with the HTTP client's own parser and judges what can
    /// be judged before connecting: an `http`/`https` URL with a host and
    /// no user info, whose literal address (in any spelling) or
    /// loopback-by-definition name (`localhost`, `*.localhost`) the policy
    /// allows. Send to the URL returned, never to `text` again. A name is
    /// judged when the client resolves it ([`Self::client_builder`]).
    pub fn check_url(&self, text: &str) -> Result<Url, EgressError> {
        let url = Url::parse(text)
            .map_err(|e| EgressError::Url(format!("not a URL the HTTP client accepts: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(EgressError::Url(
                "must be an http:// or https:// URL".into(),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EgressError::Url(
                "must not carry user info (user:password@)".into(),
            ));
        }
        match host_of(&url) {
            None => Err(EgressError::Url("has no host".into())),
            Some(Host::Ip(ip)) => {
                self.check_literal(ip)?;
                Ok(url)
            }
            Some(Host::Domain(name)) => {
                let bare = name.trim_end_matches('.');
                let loopback_name = bare == "localhost" || bare.ends_with(".localhost");
                // Open when the name is listed, or when a loopback address
                // is (the resolver then keeps only the listed addresses).
                let opened = self.allow.allows_name(name)
                    || self.allow.allows_ip(IpAddr::from([127, 0, 0, 1]))
                    || self
                        .allow
                        .allows_ip(IpAddr::from(std::net::Ipv6Addr::LOCALHOST));
                if loopback_name && !opened {
                    return Err(Refusal::name(bare, Rule::Loopback).into());
                }
                Ok(url)
            }
        }
    }

    /// Whether an address named literally may be connected to.
    pub fn check_literal(&self, ip: IpAddr) -> Result<(), Refusal> {
        match classify(ip) {
            Some(rule) if !self.allow.allows_ip(ip) => Err(Refusal::literal(ip, rule)),
            _ => Ok(()),
        }
    }

    /// Whether `ip`, which `name` resolved to, may be connected to.
    pub fn check_resolved(&self, name: &str, ip: IpAddr) -> Result<(), Refusal> {
        if self.allow.allows_name(name) {
            return Ok(());
        }
        match classify(ip) {
            Some(rule) if !self.allow.allows_ip(ip) => Err(Refusal::resolved(name, ip, rule)),
            _ => Ok(()),
        }
    }

    /// An HTTP client builder that enforces this policy at connect time:
    /// names resolved by [`crate::resolve::PolicyResolver`] (only allowed
    /// addresses reach the connector), no redirects, no proxy from the
    /// environment. Literal addresses never reach a resolver: send only
    /// URLs [`Self::check_url`] returned.
    pub fn client_builder(self: &Arc<Self>) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .dns_resolver(Arc::new(crate::resolve::PolicyResolver::new(self.clone())))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
    }
}

/// The policy's refusal inside an HTTP client error (the resolver's error
/// travels in the connect error's sources), if that is what it was.
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(refusal) = err.downcast_ref::<Refusal>() {
            return Some(refusal);
        }
        next = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(policy: &EgressPolicy, url: &str) -> String {
        match policy.check_url(url) {
            Err(err) => err.to_string(),
            Ok(parsed) => panic!("{url} passed as {parsed}"),
        }
    }

    /// Every spelling of an internal address the issue lists, normalized
    /// by the client's own parser and refused with its rule named.
    #[test]
    fn every_spelling_of_an_internal_address_is_refused_with_its_rule() {
        let policy = EgressPolicy::default();
        for (url, host, rule) in [
            ("http://127.0.0.1/", "127.0.0.1", "loopback"),
            ("http://2130706433/", "127.0.0.1", "loopback"),
            ("http://0x7f000001/", "127.0.0.1", "loopback"),
            ("http://0177.0.0.1/", "127.0.0.1", "loopback"),
            ("http://127.1/", "127.0.0.1", "loopback"),
            ("http://0x7f.1/", "127.0.0.1", "loopback"),
            ("http://0/", "0.0.0.0", "unspecified"),
            ("http://0.0.0.0:8080/", "0.0.0.0", "unspecified"),
            ("http://[::]/", "::", "unspecified"),
            ("http://[::1]:9/", "::1", "loopback"),
            ("http://[::127.0.0.1]/", "::7f00:1", "loopback"),
            ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", "loopback"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1", "loopback"),
            (
                "http://[0:0:0:0:0:ffff:a00:1]/",
                "::ffff:10.0.0.1",
                "private",
            ),
            ("http://127.0.0.1\\.example.com/", "127.0.0.1", "loopback"),
            ("http:\\\\127.0.0.1\\x", "127.0.0.1", "loopback"),
            ("HTTP://127.0.0.1./", "127.0.0.1", "loopback"),
            ("http://%31%32%37.0.0.1/", "127.0.0.1", "loopback"),
            ("http://localhost:8080/", "localhost", "loopback"),
            ("http://LOCALHOST./", "localhost", "loopback"),
            ("http://api.localhost/", "api.localhost", "loopback"),
            ("http://10.1.2.3/", "10.1.2.3", "private"),
            ("http://167772161/", "10.0.0.1", "private"),
            ("http://172.16.0.1/", "172.16.0.1", "private"),
            ("http://192.168.0.1/", "192.168.0.1", "private"),
            (
                "http://169.254.169.254/latest/meta-data",
                "169.254.169.254",
                "metadata",
            ),
            ("http://169.254.1.1/", "169.254.1.1", "link-local"),
            ("http://[fe80::1]/", "fe80::1", "link-local"),
            ("http://100.64.0.1/", "100.64.0.1", "carrier-grade NAT"),
            ("http://[fd00::1]/", "fd00::1", "unique-local"),
            ("http://[fd00:ec2::254]/", "fd00:ec2::254", "metadata"),
            ("http://224.0.0.1/", "224.0.0.1", "multicast"),
            ("http://[ff02::1]/", "ff02::1", "multicast"),
            ("http://255.255.255.255/", "255.255.255.255", "broadcast"),
        ] {
            let why = refusal(&policy, url);
            assert!(
                why.starts_with(&format!("egress refused: {host} is ")),
                "{url}: {why}"
            );
            assert!(why.contains(rule), "{url}: {why}");
            assert!(
                why.contains(&format!("egress_allow = [\"{host}\"]")),
                "{url}: {why}"
            );
        }
    }

    #[test]
    fn public_addresses_and_names_pass_names_wait_for_connect_time() {
        let policy = EgressPolicy::default();
        for url in [
            "https://hooks.example.com/x?token=1",
            "http://93.184.216.34/",
            "http://[2606:4700::1111]/",
            "http://internal-name/",
        ] {
            assert!(policy.check_url(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn what_the_client_would_not_send_is_refused() {
        let policy = EgressPolicy::default();
        for url in [
            "ftp://example.com/",
            "http://user:pw@example.com/",
            "http://",
            "not a url",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(policy.check_url(url), Err(EgressError::Url(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn the_allow_list_opens_what_it_names_and_nothing_else() {
        let policy =
            EgressPolicy::from_entries(&["127.0.0.1", "localhost", "10.9.0.0/16"]).unwrap();
        for url in [
            "http://127.0.0.1:8080/",
            "http://2130706433/",
            "http://127.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://localhost/",
            "http://10.9.1.1/",
        ] {
            assert!(policy.check_url(url).is_ok(), "{url}");
        }
        for url in ["http://127.0.0.2/", "http://10.8.0.1/", "http://[::1]/"] {
            assert!(policy.check_url(url).is_err(), "{url}");
        }
        // A suffix entry never matches what the parser reads as an address.
        let suffix = EgressPolicy::from_entries(&["*.example.com"]).unwrap();
        assert!(suffix.check_url("http://127.0.0.1\\.example.com/").is_err());
        assert!(suffix.check_url("http://127.0.0.1.example.com/").is_ok());
    }

    #[test]
    fn resolved_addresses_are_judged_unless_the_name_is_listed() {
        let policy = EgressPolicy::from_entries(&["mcp.internal", "*.svc.local"]).unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let why = policy
            .check_resolved("evil.example.com", loopback)
            .unwrap_err()
            .to_string();
        assert_eq!(
            why,
            "egress refused: evil.example.com resolves to 127.0.0.1, which is loopback (allow it with egress_allow = [\"evil.example.com\"])"
        );
        assert!(policy.check_resolved("mcp.internal", loopback).is_ok());
        assert!(policy.check_resolved("a.svc.local", loopback).is_ok());
        assert!(
            policy
                .check_resolved("example.com", "93.184.216.34".parse().unwrap())
                .is_ok()
        );
    }
}
