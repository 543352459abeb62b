//! Who the client is: the one answer every rate limit, lockout and request context reads.
//!
//! `X-Forwarded-For` is written by whoever wants to: a client may send any address in it. It is
//! believed only from hops we trust: a router of ours (it proves itself with the service key and
//! appends the peer it saw) and the proxies an operator names with `--trusted-proxy CIDR` (a
//! load balancer or TLS terminator in front). Reading the header right to left from the peer,
//! each trusted hop vouches for the entry before it; the first entry not trusted is the client.

use std::net::IpAddr;

use hyper::HeaderMap;
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` entries are believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        TrustedProxies(nets)
    }

    fn trusts(&self, ip: &IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(ip))
    }

    /// The client's address: the peer, unless the peer is a trusted hop (`by_router`: a router
    /// of ours, or a trusted proxy), in which case the walk goes on leftwards through the
    /// header. A malformed entry on the way, or none at all, leaves the peer as the client.
    pub fn client(&self, headers: &HeaderMap, peer: Option<IpAddr>, by_router: bool) -> Option<IpAddr> {
        let peer = peer?;
        if !by_router && !self.trusts(&peer) {
            return Some(peer);
        }
        let Some(header) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) else { return Some(peer) };
        let mut client = peer;
        for entry in header.rsplit(',') {
            let Ok(ip) = entry.trim().parse::<IpAddr>() else { return Some(peer) };
            client = ip;
            if !self.trusts(&ip) {
                break;
            }
        }
        Some(client)
    }
}

/// `--trusted-proxy`: a network (`10.0.0.0/8`, `fd00::/8`) or one address (`192.0.2.7`).
pub fn parse_proxy(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{s:?} is not an address or a CIDR network (10.0.0.0/8)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", xff.parse().unwrap());
        h
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn the_header_is_believed_only_from_trusted_hops() {
        let none = TrustedProxies::default();
        let lb = TrustedProxies::new(vec![parse_proxy("10.0.0.0/8").unwrap(), parse_proxy("192.0.2.7").unwrap()]);
        let h = headers("203.0.113.9, 198.51.100.1");
        // A client's own header is not believed.
        assert_eq!(none.client(&h, ip("198.51.100.50"), false), ip("198.51.100.50"));
        assert_eq!(lb.client(&h, ip("198.51.100.50"), false), ip("198.51.100.50"));
        // A trusted proxy vouches for the rightmost entry, which is not trusted: the client.
        assert_eq!(lb.client(&h, ip("10.1.2.3"), false), ip("198.51.100.1"));
        assert_eq!(lb.client(&h, ip("192.0.2.7"), false), ip("198.51.100.1"));
        // Through two trusted hops the walk goes one entry further.
        assert_eq!(lb.client(&headers("203.0.113.9, 10.9.9.9"), ip("10.1.2.3"), false), ip("203.0.113.9"));
        // A router of ours is trusted by its service key.
        assert_eq!(none.client(&headers("1.2.3.4, 203.0.113.9"), ip("127.0.0.1"), true), ip("203.0.113.9"));
        // Only trusted hops, or a malformed entry: the peer.
        assert_eq!(lb.client(&headers("10.0.0.1"), ip("10.1.2.3"), false), ip("10.0.0.1"));
        assert_eq!(lb.client(&headers("203.0.113.9, not-an-ip"), ip("10.1.2.3"), false), ip("10.1.2.3"));
        assert_eq!(lb.client(&HeaderMap::new(), ip("10.1.2.3"), false), ip("10.1.2.3"));
    }

    #[test]
    fn proxies_are_networks_or_addresses() {
        assert!(parse_proxy("10.0.0.0/8").is_ok());
        assert_eq!(parse_proxy("192.0.2.7").unwrap().to_string(), "192.0.2.7/32");
        assert_eq!(parse_proxy("::1").unwrap().to_string(), "::1/128");
        assert!(parse_proxy("10.0.0.0/33").is_err());
        assert!(parse_proxy("proxy.example").unwrap_err().contains("not an address"));
    }
}
