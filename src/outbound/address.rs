//! Which addresses a merchant-named URL may reach, and the operator's allow-list.
//!
//! The policy is a deny-list of everything that is not ordinary public unicast: a merchant must
//! not be able to make the service call itself, its neighbours on a private network, a cloud
//! metadata endpoint (169.254.169.254) or anything that only means something locally. IPv6
//! forms that carry an IPv4 address (mapped, compatible, translated, NAT64, 6to4) are judged by
//! the IPv4 address they carry, since that is where the packets end up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused: the word that ends "the address X is …".
pub fn refused_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let reason = match (a, b, c) {
        (0, _, _) => "unspecified",
        (10, _, _) => "private",
        (100, 64..=127, _) => "shared (carrier-grade NAT)",
        (127, _, _) => "loopback",
        (169, 254, _) => "link-local",
        (172, 16..=31, _) => "private",
        // IETF protocol assignments (192.0.0.0/24), the old 6to4 relay anycast (192.88.99.0/24).
        (192, 0, 0) | (192, 88, 99) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "reserved for documentation",
        (192, 168, _) => "private",
        (198, 18..=19, _) => "reserved for benchmarking",
        (224..=239, _, _) => "multicast",
        (255, 255, 255) if ip.is_broadcast() => "broadcast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(reason)
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if let Some(v4) = embedded_v4(ip) {
        return refused_v4(v4);
    }
    let s = ip.segments();
    let reason = match s[0] {
        0xfc00..=0xfdff => "private",
        0xfe80..=0xfebf => "link-local",
        // Site-local (deprecated, RFC 3879): private in effect.
        0xfec0..=0xfeff => "private",
        0xff00..=0xffff => "multicast",
        // 64:ff9b:1::/48, NAT64 for local use (RFC 8215).
        0x0064 if s[1] == 0xff9b && s[2] == 1 => "private",
        // IETF protocol assignments, Teredo (2001::/32) and ORCHID among them (RFC 6890): none is a
        // place a merchant's server lives, and Teredo hides an IPv4 address we cannot judge.
        0x2001 if s[1] < 0x0200 => "reserved",
        0x2001 if s[1] == 0x0db8 => "reserved for documentation",
        // 3fff::/20, documentation (RFC 9637).
        0x3fff if s[1] < 0x1000 => "reserved for documentation",
        // Global unicast is 2000::/3; everything else (100::/64 discard, 5f00::/16 SRv6, the
        // unassigned rest) is not a public server.
        0x2000..=0x3fff => return None,
        _ => "reserved",
    };
    Some(reason)
}

/// The IPv4 address an IPv6 address carries, for the forms that deliver to it: mapped
/// (::ffff:a.b.c.d), compatible (::a.b.c.d, deprecated), translated (::ffff:0:a.b.c.d), NAT64
/// (64:ff9b::/96) and 6to4 (2002:aabb:ccdd::/48).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => Some(last),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// One `--outbound-allow` entry: an exact host, and a port or any port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    /// The host as the URL parser spells it (lowercase name, dotted IPv4, `[v6]`).
    pub host: String,
    /// The one port allowed; `None` allows every port.
    pub port: Option<u16>,
}

impl AllowEntry {
    /// Reads `HOST`, `HOST:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address.
    pub fn parse(entry: &str) -> Result<AllowEntry, String> {
        let bad = || format!("--outbound-allow {entry:?}: expected HOST or HOST:PORT");
        let entry_t = entry.trim();
        if entry_t.is_empty() {
            return Err(bad());
        }
        let (host, port) = if let Some(rest) = entry_t.strip_prefix('[') {
            let (v6, after) = rest.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(bad)?),
            };
            (format!("[{v6}]"), port)
        } else if entry_t.matches(':').count() > 1 {
            (format!("[{entry_t}]"), None)
        } else {
            match entry_t.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (entry_t.to_string(), None),
            }
        };
        let port = port.map(|p| p.parse::<u16>().map_err(|_| bad())).transpose()?;
        // The same parser as URLs, so `Hooks.Example` and `0x7f.1` match what a URL would say.
        let host = url::Host::parse(&host).map_err(|_| bad())?.to_string();
        Ok(AllowEntry { host, port })
    }

    /// Whether this entry allows `host` (as [`url::Url::host_str`] spells it) on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.host == host && self.port.is_none_or(|p| p == port)
    }
}

/// Reads every allow-list entry; a comma inside one entry splits it too.
pub fn parse_allow_list(entries: &[String]) -> Result<Vec<AllowEntry>, String> {
    entries.iter().flat_map(|e| e.split(',')).filter(|e| !e.trim().is_empty()).map(AllowEntry::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_ranges() {
        let refused = [
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("169.254.0.1", "link-local"),
            ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("100.127.255.255", "shared (carrier-grade NAT)"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.0.8", "reserved"),
            ("192.0.2.1", "reserved for documentation"),
            ("198.18.0.1", "reserved for benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:7f00:1", "loopback"),
            ("::ffff:10.1.2.3", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("::ffff:0:127.0.0.1", "loopback"),
            ("64:ff9b::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b:1::1", "private"),
            ("2002:7f00:1::1", "loopback"),
            ("2002:c0a8:101::1", "private"),
            ("fd00::1", "private"),
            ("fc00::1", "private"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "private"),
            ("ff02::1", "multicast"),
            ("ff0e::1", "multicast"),
            ("100::1", "reserved"),
            ("2001::1", "reserved"),
            ("2001:db8::1", "reserved for documentation"),
            ("3fff::1", "reserved for documentation"),
            ("5f00::1", "reserved"),
            ("::2", "unspecified"),
            ("0:0:0:1::", "reserved"),
        ];
        for (ip, reason) in refused {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(refused_reason(addr), Some(reason), "{ip}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.253.1.1",
            "192.169.0.1",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2606:4700::1111",
            "2a00:1450:4001::1",
            "2001:4860:4860::8888",
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(refused_reason(addr), None, "{ip}");
        }
    }

    #[test]
    fn allow_entries() {
        let e = AllowEntry::parse("Hooks.Test:8443").unwrap();
        assert_eq!(e, AllowEntry { host: "hooks.test".into(), port: Some(8443) });
        assert!(e.allows("hooks.test", 8443));
        assert!(!e.allows("hooks.test", 443));
        let any = AllowEntry::parse("hooks.test").unwrap();
        assert!(any.allows("hooks.test", 1) && !any.allows("sub.hooks.test", 1));
        assert_eq!(AllowEntry::parse("0x7f.1").unwrap().host, "127.0.0.1");
        assert_eq!(AllowEntry::parse("[::1]:80").unwrap(), AllowEntry { host: "[::1]".into(), port: Some(80) });
        assert_eq!(AllowEntry::parse("::1").unwrap(), AllowEntry { host: "[::1]".into(), port: None });
        for bad in ["", "a:b", "a:70000", "[::1", "[::1]x", "a b"] {
            assert!(AllowEntry::parse(bad).is_err(), "{bad:?}");
        }
        let list = parse_allow_list(&["a.test,b.test:9".into(), "c.test".into()]).unwrap();
        assert_eq!(list.len(), 3);
        assert!(parse_allow_list(&["a.test,b.test:x".into()]).unwrap_err().contains("b.test:x"));
    }
}
