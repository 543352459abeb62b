//! Name resolution for outbound calls, behind a trait so tests map names to local addresses.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;

/// Turns a host name into the addresses it stands for. The client checks every address it gets
/// and connects to a checked one, so a name is looked up once per connection.
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `host` (`port` is given for resolvers that want it; most ignore it).
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;
}

/// The operating system's resolver (`getaddrinfo` through [`tokio::net::lookup_host`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, port)).await?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for a in addrs {
                if !ips.contains(&a.ip()) {
                    ips.push(a.ip());
                }
            }
            Ok(ips)
        })
    }
}
