//! Where a connection or a request comes from: the source it is counted
//! under, and behind a trusted proxy, the client the proxy forwarded it
//! for.
//!
//! A source is an IPv4 address, or an IPv6 /64: one host usually holds a
//! whole /64, so counting IPv6 addresses one by one would give a single
//! client 2^64 shares. An IPv4-mapped IPv6 address (a dual-stack socket's
//! view of an IPv4 client) is that IPv4 address.
//!
//! A forwarded header is read only on a connection from a trusted proxy
//! (`trusted_proxies`), and only the one header the operator names
//! (`forwarded_header`): a proxy appends the client it saw to the header it
//! writes and passes every other header through, so reading a header the
//! proxy does not write would let the client choose its own source. The
//! client is the right-most hop that is not itself a trusted proxy; hops
//! to its left were written by the client and are ignored. A hop that does
//! not parse (`unknown`, an obfuscated `_name`, garbage) where a client was
//! expected leaves the request counted under the proxy's own address.

use actix_web::http::header::{HeaderMap, HeaderName};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Open connections one source may hold on one listener (and, behind a
/// trusted proxy, requests one forwarded client may have in flight) unless
/// configured (`max_connections_per_source`): a sixteenth of
/// [`super::DEFAULT_MAX_CONNECTIONS`].
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 64;

/// What connections and requests are counted under: an IPv4 address or an
/// IPv6 /64 (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    /// The source `ip` belongs to.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self(ip),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => Self(IpAddr::V6(Ipv6Addr::from(
                    u128::from(v6) & (u128::MAX << 64),
                ))),
            },
        }
    }
}

/// The header a trusted proxy names its client in (`forwarded_header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    #[default]
    XForwardedFor,
    /// RFC 7239: `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`.
    Forwarded,
}

impl ForwardedHeader {
    fn name(self) -> HeaderName {
        match self {
            Self::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            Self::Forwarded => HeaderName::from_static("forwarded"),
        }
    }
}

/// Whether an address is one of the operator's trusted proxies.
type ProxyTrust = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// How many connections (or forwarded requests in flight) one source may
/// hold, and whose forwarded header is believed.
#[derive(Clone)]
pub struct SourceLimits {
    per_source: usize,
    trusted: Option<ProxyTrust>,
    header: ForwardedHeader,
}

impl fmt::Debug for SourceLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceLimits")
            .field("per_source", &self.per_source)
            .field("trusts_proxies", &self.trusted.is_some())
            .field("header", &self.header)
            .finish()
    }
}

impl Default for SourceLimits {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_CONNECTIONS_PER_SOURCE)
    }
}

impl SourceLimits {
    /// At most `per_source` (at least 1) per source; no proxy trusted.
    pub fn new(per_source: usize) -> Self {
        Self {
            per_source: per_source.max(1),
            trusted: None,
            header: ForwardedHeader::default(),
        }
    }

    /// Believes `header` on connections from the addresses `is_proxy`
    /// accepts (`trusted_proxies`).
    pub fn trusting(
        mut self,
        is_proxy: impl Fn(IpAddr) -> bool + Send + Sync + 'static,
        header: ForwardedHeader,
    ) -> Self {
        self.trusted = Some(Arc::new(is_proxy));
        self.header = header;
        self
    }

    pub fn per_source(&self) -> usize {
        self.per_source
    }

    /// Whether `ip` is a trusted proxy (an IPv4-mapped address as its
    /// IPv4 address: a dual-stack socket's view of an IPv4 peer).
    pub fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        self.trusted
            .as_ref()
            .is_some_and(|trusts| trusts(ip.to_canonical()))
    }

    /// The client a request from the trusted proxy `peer` was forwarded
    /// for (see the module docs): the right-most untrusted hop of the
    /// forwarded header; the left-most hop when every hop is trusted; the
    /// proxy itself without the header or when that hop does not parse.
    pub fn forwarded_source(&self, peer: IpAddr, headers: &HeaderMap) -> Source {
        let values = headers
            .get_all(self.header.name())
            .filter_map(|value| value.to_str().ok());
        let hops: Vec<Option<IpAddr>> = match self.header {
            ForwardedHeader::XForwardedFor => values
                .flat_map(|value| value.split(','))
                .map(str::trim)
                .filter(|hop| !hop.is_empty())
                .map(parse_hop)
                .collect(),
            ForwardedHeader::Forwarded => values
                .flat_map(|value| value.split(','))
                .filter(|element| !element.trim().is_empty())
                .map(forwarded_for)
                .collect(),
        };
        let mut innermost_trusted = None;
        for hop in hops.iter().rev() {
            match hop {
                Some(ip) if self.is_trusted_proxy(*ip) => innermost_trusted = Some(*ip),
                Some(ip) => return Source::of(*ip),
                None => return Source::of(peer),
            }
        }
        Source::of(innermost_trusted.unwrap_or(peer))
    }
}

/// The `for=` hop of one `Forwarded` element, if it names an address.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
            .and_then(parse_hop)
    })
}

/// One hop: an address, with or without a port (`198.51.100.7:4711`,
/// `[2001:db8::1]:4711`, `[2001:db8::1]`).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .or_else(|_| hop.parse::<SocketAddr>().map(|addr| addr.ip()))
        .or_else(|_| {
            hop.strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .unwrap_or(hop)
                .parse::<IpAddr>()
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn headers(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// Trusts 10.0.0.0/8 and 127.0.0.2.
    fn behind_proxies(header: ForwardedHeader) -> SourceLimits {
        SourceLimits::new(8).trusting(
            |ip| match ip {
                IpAddr::V4(v4) => {
                    v4.octets()[0] == 10 || v4 == std::net::Ipv4Addr::new(127, 0, 0, 2)
                }
                IpAddr::V6(_) => false,
            },
            header,
        )
    }

    #[test]
    fn ipv6_sources_are_grouped_by_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            Source::of(ip("2001:db8:1:2:aaaa::1")),
            Source::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        );
        assert_ne!(
            Source::of(ip("2001:db8:1:2::1")),
            Source::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(
            Source::of(ip("::ffff:192.0.2.7")),
            Source::of(ip("192.0.2.7"))
        );
        assert_ne!(Source::of(ip("192.0.2.7")), Source::of(ip("192.0.2.8")));
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_hop_of_x_forwarded_for() {
        let limits = behind_proxies(ForwardedHeader::XForwardedFor);
        let proxy = ip("127.0.0.2");
        let of =
            |values: &[&str]| limits.forwarded_source(proxy, &headers("x-forwarded-for", values));
        let client = Source::of(ip("203.0.113.7"));
        assert_eq!(of(&["203.0.113.7"]), client);
        // Whatever the client wrote to the left is ignored.
        assert_eq!(of(&["198.51.100.1, 203.0.113.7"]), client);
        assert_eq!(of(&["not-an-ip, 203.0.113.7"]), client);
        // Trusted hops to the right are skipped, across header lines too.
        assert_eq!(
            of(&["198.51.100.1, 203.0.113.7, 10.1.2.3", "10.9.9.9"]),
            client
        );
        assert_eq!(of(&["203.0.113.7:4711"]), client);
        assert_eq!(of(&["[2001:db8::5]:4711"]), Source::of(ip("2001:db8::77")));
        // Every hop trusted: the request began inside; the left-most hop.
        assert_eq!(of(&["10.0.0.5, 10.0.0.6"]), Source::of(ip("10.0.0.5")));
        // No header, or a client hop that is not an address: the proxy.
        assert_eq!(of(&[]), Source::of(proxy));
        assert_eq!(of(&["203.0.113.7, unknown"]), Source::of(proxy));
        // The other header is not what this proxy writes: ignored.
        let forwarded = headers("forwarded", &["for=203.0.113.7"]);
        assert_eq!(
            limits.forwarded_source(proxy, &forwarded),
            Source::of(proxy)
        );
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_for_of_forwarded() {
        let limits = behind_proxies(ForwardedHeader::Forwarded);
        let proxy = ip("127.0.0.2");
        let of = |values: &[&str]| limits.forwarded_source(proxy, &headers("forwarded", values));
        assert_eq!(
            of(&["for=198.51.100.1, for=203.0.113.7;proto=https;by=10.0.0.1"]),
            Source::of(ip("203.0.113.7"))
        );
        assert_eq!(
            of(&["For=\"[2001:db8:cafe::17]:4711\"", "for=10.2.3.4"]),
            Source::of(ip("2001:db8:cafe::1"))
        );
        assert_eq!(
            of(&["for=\"203.0.113.7:80\""]),
            Source::of(ip("203.0.113.7"))
        );
        assert_eq!(of(&["for=unknown"]), Source::of(proxy));
        assert_eq!(of(&["for=_hidden"]), Source::of(proxy));
        assert_eq!(of(&["proto=https"]), Source::of(proxy));
        let xff = headers("x-forwarded-for", &["203.0.113.7"]);
        assert_eq!(limits.forwarded_source(proxy, &xff), Source::of(proxy));
    }

    #[test]
    fn nothing_is_trusted_by_default() {
        let limits = SourceLimits::default();
        assert_eq!(limits.per_source(), DEFAULT_MAX_CONNECTIONS_PER_SOURCE);
        assert!(!limits.is_trusted_proxy(ip("127.0.0.1")));
        assert_eq!(SourceLimits::new(0).per_source(), 1);
    }
}
