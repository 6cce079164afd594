//! Which addresses are refused by default, and by which rule.
//!
//! One function, [`classify`], decides for IPv4 and IPv6 alike; IPv6 forms
//! that carry an IPv4 address (mapped `::ffff:a.b.c.d`, compatible
//! `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by that
//! IPv4 address, because that is where the packets end up.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `127.0.0.0/8`, `::1`, and the names `localhost` / `*.localhost`.
    Loopback,
    /// RFC 1918: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `100.64.0.0/10` (often cluster- or provider-internal).
    CarrierGradeNat,
    /// `fc00::/7` (and the deprecated site-local `fec0::/10`).
    UniqueLocal,
    /// `0.0.0.0/8` ("this network"), `::`.
    Unspecified,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Cloud instance metadata services (AWS, GCP, Azure, Alibaba, Oracle,
    /// ECS task metadata), which hand out the platform's own credentials.
    Metadata,
    /// Not routable on the internet: `240.0.0.0/4`, `192.0.0.0/24`,
    /// benchmarking `198.18.0.0/15`, the documentation ranges, `100::/64`,
    /// `2001:db8::/32`.
    Reserved,
}

impl Rule {
    /// A stable label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link_local",
            Self::CarrierGradeNat => "carrier_grade_nat",
            Self::UniqueLocal => "unique_local",
            Self::Unspecified => "unspecified",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Metadata => "metadata",
            Self::Reserved => "reserved",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Loopback => "loopback",
            Self::Private => "a private address (RFC 1918)",
            Self::LinkLocal => "link-local",
            Self::CarrierGradeNat => "carrier-grade NAT (100.64.0.0/10)",
            Self::UniqueLocal => "a unique-local IPv6 address (fc00::/7)",
            Self::Unspecified => "unspecified",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Metadata => "a cloud metadata address",
            Self::Reserved => "a reserved address",
        })
    }
}

/// Metadata services; checked before the ranges that contain them, so the
/// refusal names the more telling rule.
const METADATA_V4: [Ipv4Addr; 5] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
    Ipv4Addr::new(192, 0, 0, 192),
];
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)];

/// The IPv4 address an IPv6 address delivers to, when it embeds one:
/// mapped, compatible (not `::` or `::1`), NAT64, 6to4.
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return Some(tail);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// The rule that refuses `ip` by default, if any.
pub fn classify(ip: IpAddr) -> Option<Rule> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Rule> {
    let [a, b, c, _] = ip.octets();
    Some(if METADATA_V4.contains(&ip) {
        Rule::Metadata
    } else if a == 0 {
        Rule::Unspecified
    } else if ip.is_loopback() {
        Rule::Loopback
    } else if ip.is_private() {
        Rule::Private
    } else if ip.is_link_local() {
        Rule::LinkLocal
    } else if a == 100 && (b & 0xc0) == 64 {
        Rule::CarrierGradeNat
    } else if ip.is_broadcast() {
        Rule::Broadcast
    } else if ip.is_multicast() {
        Rule::Multicast
    } else if a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b & 0xfe) == 18)
        || ip.is_documentation()
    {
        Rule::Reserved
    } else {
        return None;
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<Rule> {
    let s = ip.segments();
    Some(if METADATA_V6.contains(&ip) {
        Rule::Metadata
    } else if ip.is_unspecified() {
        Rule::Unspecified
    } else if ip.is_loopback() {
        Rule::Loopback
    } else if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfec0 {
        Rule::UniqueLocal
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Rule::LinkLocal
    } else if ip.is_multicast() {
        Rule::Multicast
    } else if (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) || (s[0] == 0x2001 && s[1] == 0x0db8) {
        Rule::Reserved
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> Option<Rule> {
        classify(text.parse().unwrap())
    }

    #[test]
    fn every_default_refused_class_has_its_rule() {
        for (ip, expected) in [
            ("127.0.0.1", Rule::Loopback),
            ("127.255.255.254", Rule::Loopback),
            ("::1", Rule::Loopback),
            ("10.1.2.3", Rule::Private),
            ("172.16.0.1", Rule::Private),
            ("172.31.255.255", Rule::Private),
            ("192.168.1.1", Rule::Private),
            ("169.254.1.1", Rule::LinkLocal),
            ("fe80::1", Rule::LinkLocal),
            ("100.64.0.1", Rule::CarrierGradeNat),
            ("100.127.255.255", Rule::CarrierGradeNat),
            ("fc00::1", Rule::UniqueLocal),
            ("fd12:3456::1", Rule::UniqueLocal),
            ("fec0::1", Rule::UniqueLocal),
            ("0.0.0.0", Rule::Unspecified),
            ("0.1.2.3", Rule::Unspecified),
            ("::", Rule::Unspecified),
            ("224.0.0.1", Rule::Multicast),
            ("239.255.255.250", Rule::Multicast),
            ("ff02::1", Rule::Multicast),
            ("255.255.255.255", Rule::Broadcast),
            ("169.254.169.254", Rule::Metadata),
            ("169.254.170.2", Rule::Metadata),
            ("100.100.100.200", Rule::Metadata),
            ("168.63.129.16", Rule::Metadata),
            ("192.0.0.192", Rule::Metadata),
            ("fd00:ec2::254", Rule::Metadata),
            ("240.0.0.1", Rule::Reserved),
            ("198.18.0.1", Rule::Reserved),
            ("192.0.2.1", Rule::Reserved),
            ("2001:db8::1", Rule::Reserved),
        ] {
            assert_eq!(rule(ip), Some(expected), "{ip}");
        }
    }

    #[test]
    fn ipv4_inside_ipv6_is_judged_by_the_ipv4() {
        for (ip, expected) in [
            ("::ffff:127.0.0.1", Some(Rule::Loopback)),
            ("::ffff:10.0.0.1", Some(Rule::Private)),
            ("::ffff:169.254.169.254", Some(Rule::Metadata)),
            ("::127.0.0.1", Some(Rule::Loopback)),
            ("::10.0.0.1", Some(Rule::Private)),
            ("::0.0.0.2", Some(Rule::Unspecified)),
            ("64:ff9b::7f00:1", Some(Rule::Loopback)),
            ("2002:7f00:1::", Some(Rule::Loopback)),
            ("2002:a00:1::1", Some(Rule::Private)),
            ("::ffff:93.184.216.34", None),
            ("::93.184.216.34", None),
        ] {
            assert_eq!(rule(ip), expected, "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
        ] {
            assert_eq!(rule(ip), None, "{ip}");
        }
    }
}
