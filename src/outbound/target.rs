//! A URL a merchant gave, checked: its form (length, scheme, credentials) and then the addresses
//! its host stands for. The addresses checked here are the ones connected to.

use std::net::IpAddr;

use url::{Host, Url};

use super::address::{AllowEntry, refused_reason};
use super::{Inner, OutboundError};

/// The longest URL accepted, in bytes of the text as given and as normalised.
pub const MAX_URL_LEN: usize = 2048;

/// A URL whose form passed the rules, with what connecting to it needs.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: Url,
    /// The host as the URL parser spells it: lowercase name, dotted IPv4 or `[v6]`.
    pub host: String,
    pub port: u16,
    pub https: bool,
    /// The operator allowed this exact host (and port): any address, and plain http.
    pub allow_listed: bool,
    /// The host is an IP address, not a name: nothing to resolve.
    pub ip: Option<IpAddr>,
}

/// Parses a URL given as text and checks its form.
pub fn parse(allow: &[AllowEntry], raw: &str) -> Result<Target, OutboundError> {
    if raw.len() > MAX_URL_LEN {
        return Err(too_long());
    }
    let url = Url::parse(raw).map_err(|_| OutboundError::InvalidUrl("the URL is not a valid absolute http(s) URL".into()))?;
    check(allow, url)
}

/// Checks the form of a parsed URL (a first URL or a redirect's target).
pub fn check(allow: &[AllowEntry], url: Url) -> Result<Target, OutboundError> {
    if url.as_str().len() > MAX_URL_LEN {
        return Err(too_long());
    }
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        _ => return Err(OutboundError::InvalidUrl("the URL must use https".into())),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(OutboundError::InvalidUrl("the URL must not contain a user name or password".into()));
    }
    let (host, ip) = match url.host() {
        Some(Host::Domain(d)) => (d.to_string(), None),
        Some(Host::Ipv4(v4)) => (v4.to_string(), Some(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => (format!("[{v6}]"), Some(IpAddr::V6(v6))),
        None => return Err(OutboundError::InvalidUrl("the URL has no host".into())),
    };
    let port = url.port_or_known_default().ok_or_else(|| OutboundError::InvalidUrl("the URL has no port".into()))?;
    let allow_listed = allow.iter().any(|e| e.allows(&host, port));
    if !https && !allow_listed {
        return Err(OutboundError::Refused("the URL must use https".into()));
    }
    if let Some(ip) = ip.filter(|_| !allow_listed) {
        refuse_literal(ip)?;
    }
    Ok(Target { url, host, port, https, allow_listed, ip })
}

fn too_long() -> OutboundError {
    OutboundError::InvalidUrl(format!("the URL is longer than {MAX_URL_LEN} characters"))
}

fn refuse_literal(ip: IpAddr) -> Result<(), OutboundError> {
    match refused_reason(ip) {
        Some(reason) => Err(OutboundError::Refused(format!("the address {ip} is {reason}"))),
        None => Ok(()),
    }
}

/// The addresses to connect to: the IP literal, or every address the host resolves to, each one
/// allowed (one refused address refuses the host: a name must not mix public and private
/// addresses to slip through).
pub async fn addresses(inner: &Inner, target: &Target) -> Result<Vec<IpAddr>, OutboundError> {
    if let Some(ip) = target.ip {
        return Ok(vec![ip]);
    }
    let unresolved = || OutboundError::Resolve(format!("the host {} could not be resolved", target.host));
    let lookup = inner.resolver.resolve(&target.host, target.port);
    let ips = match tokio::time::timeout(inner.connect_timeout, lookup).await {
        Ok(Ok(ips)) => ips,
        Ok(Err(e)) => {
            tracing::debug!(host = %target.host, error = %e, "outbound: name not resolved");
            return Err(unresolved());
        }
        Err(_) => return Err(OutboundError::Resolve(format!("the host {} did not resolve in time", target.host))),
    };
    if ips.is_empty() {
        return Err(unresolved());
    }
    if !target.allow_listed {
        for ip in &ips {
            if let Some(reason) = refused_reason(*ip) {
                // The address itself is left out: it is what an internal name resolves to.
                return Err(OutboundError::Refused(format!("the host {} resolves to an address that is {reason}", target.host)));
            }
        }
    }
    Ok(ips)
}
