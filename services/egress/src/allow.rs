//! The operator's allow-list: what a deployment opens past the default
//! rules (an in-cluster upstream, a loopback test receiver).
//!
//! Entries are host names (`mcp.internal`), `*.` suffixes
//! (`*.svc.cluster.local`: its subdomains, not itself), addresses
//! (`127.0.0.1`, `::1`) and CIDRs (`10.20.0.0/16`). Names are normalized
//! by the same URL parser as the URLs they are matched against, so an
//! entry and a URL that name the same host always agree. A name entry
//! opens that name whatever it resolves to (the operator vouches for it);
//! an address or CIDR entry opens those addresses, however they were
//! reached (a literal in the URL, or a name resolving to them).

use crate::error::EgressError;
use crate::rules::embedded_v4;
use reqwest::Url;
use reqwest::dns::Name;
use std::net::IpAddr;

/// An address range (`10.20.0.0/16`) or one address (`127.0.0.1`, `::1`,
/// `[::1]`), matched strictly: an address is in it or not, whatever IPv4
/// address it may embed (the allow-list adds that; a list of peers, such
/// as trusted proxies, must not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    base: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `text` (trimmed), or says why it is not an address or CIDR.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let text = text.trim();
        if let Some((addr, prefix)) = text.split_once('/') {
            let base: IpAddr = addr
                .parse()
                .map_err(|_| "a CIDR is an IP address, '/' and a prefix length")?;
            let max = if base.is_ipv4() { 32 } else { 128 };
            let prefix: u8 = prefix
                .parse()
                .ok()
                .filter(|p| *p <= max)
                .ok_or("the prefix length is out of range")?;
            return Ok(Self { base, prefix });
        }
        let base: IpAddr = text
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| "expected an IP address or a CIDR")?;
        let prefix = if base.is_ipv4() { 32 } else { 128 };
        Ok(Self { base, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.base, ip) {
            (IpAddr::V4(base), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(base) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(base), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(base) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// See the module docs. Empty by default: nothing opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    names: Vec<String>,
    suffixes: Vec<String>,
    nets: Vec<Cidr>,
    /// The entries as written, for messages.
    entries: Vec<String>,
}

impl AllowList {
    /// Parses `entries` (see the module docs); an entry that is none of
    /// the four forms is refused, naming it.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, EgressError> {
        let mut list = Self::default();
        for entry in entries {
            list.add(entry.as_ref())?;
        }
        Ok(list)
    }

    fn add(&mut self, entry: &str) -> Result<(), EgressError> {
        let text = entry.trim().to_ascii_lowercase();
        let bad = |why: &str| EgressError::Entry {
            entry: entry.to_owned(),
            why: why.to_owned(),
        };
        if text.is_empty() {
            return Err(bad("empty"));
        }
        if text.contains('/') {
            self.nets.push(Cidr::parse(&text).map_err(bad)?);
        } else if let Ok(net) = Cidr::parse(&text) {
            self.nets.push(net);
        } else if let Some(domain) = text.strip_prefix("*.") {
            self.suffixes.push(normalized_name(domain).ok_or_else(|| {
                bad("after '*.' comes a domain name (not an address, no port or path)")
            })?);
        } else {
            self.names.push(normalized_name(&text).ok_or_else(|| {
                bad("expected a host name, '*.' and a domain, an IP address or a CIDR (no scheme, port or path)")
            })?);
        }
        self.entries.push(entry.trim().to_owned());
        Ok(())
    }

    /// This list and `other`'s entries.
    pub fn union(&self, other: &AllowList) -> AllowList {
        let mut list = self.clone();
        list.names.extend(other.names.iter().cloned());
        list.suffixes.extend(other.suffixes.iter().cloned());
        list.nets.extend(other.nets.iter().copied());
        list.entries.extend(other.entries.iter().cloned());
        list
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries as written.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Whether the host name `name` (as the URL parser wrote it) is
    /// listed, by name or by suffix.
    pub fn allows_name(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.names.contains(&name)
            || self.suffixes.iter().any(|s| {
                name.strip_suffix(s.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
            })
    }

    /// Whether `url`'s host (as the URL parser read it) is listed: a name
    /// by name or suffix, an address by address or range.
    pub fn allows_host(&self, url: &Url) -> bool {
        match crate::policy::host_of(url) {
            Some(crate::policy::Host::Domain(name)) => self.allows_name(name),
            Some(crate::policy::Host::Ip(ip)) => self.allows_ip(ip),
            None => false,
        }
    }

    /// Whether `ip` is in a listed address or range; an IPv6 address
    /// carrying an IPv4 one is also matched by that IPv4 address.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let embedded = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.nets
            .iter()
            .any(|net| net.contains(ip) || embedded.is_some_and(|v4| net.contains(v4)))
    }
}

/// `text` as the URL parser writes a host name (lowercase, IDNA), if it is
/// one: not an address, no port, path or other URL part.
fn normalized_name(text: &str) -> Option<String> {
    if text.is_empty() || text.contains([':', '/', '\\', '@', '?', '#', '[', ']', '%', ' ']) {
        return None;
    }
    let url = Url::parse(&format!("http://{text}/")).ok()?;
    let domain = match crate::policy::host_of(&url)? {
        crate::policy::Host::Domain(domain) if url.port().is_none() && url.path() == "/" => domain,
        _ => return None,
    };
    // Also a name the resolver accepts.
    domain.parse::<Name>().ok()?;
    Some(domain.trim_end_matches('.').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cidr_matches_strictly_where_the_allow_list_follows_embedded_ipv4() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let net = Cidr::parse(" 10.0.0.0/8 ").unwrap();
        assert!(net.contains(ip("10.1.2.3")));
        assert!(!net.contains(ip("11.0.0.1")));
        // 6to4 for 10.0.0.1: delivered there, but not that address.
        assert!(!net.contains(ip("2002:a00:1::1")));
        assert!(
            AllowList::parse(&["10.0.0.0/8"])
                .unwrap()
                .allows_ip(ip("2002:a00:1::1"))
        );
        assert!(Cidr::parse("[::1]").unwrap().contains(ip("::1")));
        assert!(
            Cidr::parse("2001:db8::/32")
                .unwrap()
                .contains(ip("2001:db8:1::1"))
        );
        assert!(Cidr::parse("proxy.internal").is_err());
        assert!(Cidr::parse("10.0.0.0/33").is_err());
    }

    #[test]
    fn the_four_forms_parse_and_match() {
        let list = AllowList::parse(&[
            "MCP.Internal",
            "*.example.com",
            "127.0.0.1",
            "[::1]",
            "10.20.0.0/16",
            "fd00::/8",
        ])
        .unwrap();
        assert!(list.allows_name("mcp.internal"));
        assert!(list.allows_name("mcp.internal."));
        assert!(list.allows_name("a.example.com"));
        assert!(list.allows_name("a.b.example.com"));
        assert!(!list.allows_name("example.com"));
        assert!(!list.allows_name("badexample.com"));
        assert!(!list.allows_name("example.com.evil.org"));
        assert!(list.allows_ip("127.0.0.1".parse().unwrap()));
        assert!(!list.allows_ip("127.0.0.2".parse().unwrap()));
        assert!(list.allows_ip("::1".parse().unwrap()));
        assert!(list.allows_ip("10.20.3.4".parse().unwrap()));
        assert!(!list.allows_ip("10.21.0.1".parse().unwrap()));
        assert!(list.allows_ip("fd12::1".parse().unwrap()));
        assert!(list.allows_ip("::ffff:127.0.0.1".parse().unwrap()));
        assert!(list.allows_ip("::ffff:10.20.0.9".parse().unwrap()));
        assert_eq!(list.entries().len(), 6);
    }

    #[test]
    fn everything_else_is_refused_naming_the_entry() {
        for bad in [
            "",
            "http://x.example.com",
            "x.example.com:8080",
            "x.example.com/path",
            "10.0.0.0/33",
            "::/129",
            "nonsense/8",
            "*.10.0.0.1",
            "a@b",
            "127.0.0.1\\.example.com",
        ] {
            let err = AllowList::parse(&[bad]).unwrap_err();
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
    }

    #[test]
    fn names_are_normalized_like_urls() {
        let list = AllowList::parse(&["BÜCHER.example"]).unwrap();
        assert!(list.allows_name("xn--bcher-kva.example"));
    }
}
