//! What one connection may hold: it is closed when idle (no request under way and nothing read
//! or written for `idle`, counted from accept), a request body must arrive within
//! `body_timeout`, and connections are capped in all and per client address: past a cap the
//! caller gets a plain 503 with `Retry-After` and the connection is closed.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The limits of one listener (flags of every serving role).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A connection with no request under way and no byte read or written for this long is closed.
    pub idle: Duration,
    /// A request body must arrive within this long (408 after).
    pub body_timeout: Duration,
    /// Open connections in all.
    pub max_connections: usize,
    /// Open connections from one client address.
    pub max_per_address: usize,
    /// Concurrent streams of one HTTP/2 connection.
    pub h2_streams: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            idle: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_per_address: 256,
            h2_streams: 128,
        }
    }
}

/// The open connections, in all and per address.
#[derive(Default)]
pub struct OpenConnections {
    per_address: Mutex<HashMap<IpAddr, usize>>,
    total: AtomicUsize,
    /// Connections refused past a cap since the start.
    refused: AtomicU64,
}

/// One admitted connection; it counts until dropped.
pub struct Admitted {
    open: Arc<OpenConnections>,
    address: IpAddr,
}

impl OpenConnections {
    /// Admits a connection from `address` within `limits`, or `None` past a cap.
    pub fn admit(self: &Arc<Self>, address: IpAddr, limits: &ConnectionLimits) -> Option<Admitted> {
        let mut per = self.per_address.lock().ok()?;
        let mine = per.get(&address).copied().unwrap_or(0);
        if mine >= limits.max_per_address || self.total.load(Ordering::Relaxed) >= limits.max_connections {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        per.insert(address, mine.saturating_add(1));
        self.total.fetch_add(1, Ordering::Relaxed);
        Some(Admitted { open: self.clone(), address })
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Connections refused past a cap since the start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut per) = self.open.per_address.lock() {
            match per.get(&self.address).copied() {
                Some(n) if n > 1 => {
                    per.insert(self.address, n - 1);
                }
                _ => {
                    per.remove(&self.address);
                }
            }
        }
        self.open.total.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The answer past a cap: written on the raw connection before it is closed.
pub const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Length: 126\r\n\r\n\
{\"success\":false,\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"too many connections\",\"fields\":[]},\"message\":\"too many connections\"}";

/// Requests under way on one connection: while any is, the connection is not idle.
#[derive(Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Counts one request until the guard drops.
    pub fn start(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self.0.clone())
    }

    fn busy(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

pub struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream that fails with `TimedOut` once idle: nothing read or written for `idle` (up to
/// twice that, as the timer moves lazily) while no request is under way. The clock starts at
/// accept, so a silent connection is closed too.
///
/// Activity is counted, not timed: a read or write only bumps a counter, and the timer is moved
/// on lazily when it fires after activity, so the hot path pays no timer reset per operation.
pub struct IdleTimeout<S> {
    inner: S,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    in_flight: InFlight,
    /// Reads and writes so far, and how many there were when the deadline was last set.
    activity: u64,
    armed_at: u64,
}

impl<S> IdleTimeout<S> {
    pub fn new(inner: S, idle: Duration, in_flight: InFlight) -> Self {
        IdleTimeout { inner, idle, deadline: Box::pin(tokio::time::sleep(idle)), in_flight, activity: 0, armed_at: 0 }
    }

    fn touch(&mut self) {
        self.activity = self.activity.wrapping_add(1);
    }

    /// `Pending` from the stream: an error once the connection has been idle too long.
    fn pending_or_timeout<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        loop {
            match self.deadline.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Something happened since the deadline was set, or a request is under way:
                // the idle time starts again now.
                Poll::Ready(()) if self.activity != self.armed_at || self.in_flight.busy() => {
                    self.armed_at = self.activity;
                    self.deadline.as_mut().reset(Instant::now() + self.idle);
                }
                Poll::Ready(()) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "connection idle"))),
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                self.touch();
                Poll::Ready(r)
            }
            Poll::Pending => self.pending_or_timeout(cx),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.touch();
                Poll::Ready(r)
            }
            Poll::Pending => self.pending_or_timeout(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                self.touch();
                Poll::Ready(r)
            }
            Poll::Pending => self.pending_or_timeout(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_past_a_cap_is_well_formed() {
        let text = std::str::from_utf8(OVER_CAPACITY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "UNAVAILABLE");
    }

    #[test]
    fn caps_hold_in_all_and_per_address() {
        let open = Arc::new(OpenConnections::default());
        let limits = ConnectionLimits { max_connections: 3, max_per_address: 2, ..ConnectionLimits::default() };
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = open.admit(a, &limits).unwrap();
        let _second = open.admit(a, &limits).unwrap();
        assert!(open.admit(a, &limits).is_none(), "two per address");
        let _third = open.admit(b, &limits).unwrap();
        assert!(open.admit(b, &limits).is_none(), "three in all");
        drop(first);
        assert_eq!(open.total(), 2);
        assert!(open.admit(a, &limits).is_some(), "a closed connection frees its place");
    }
}
