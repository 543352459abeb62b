//! In-memory token buckets for the sign-in endpoints (login, MFA verify, refresh, key
//! validation): per account and per client address, answered 429 `RATE_LIMITED` with
//! `Retry-After`. State is per process: behind several routers an attacker gets each process's
//! allowance, which still bounds guessing to a small multiple of the configured rate. Buckets
//! refill by the process's clock (callers pass its `now_ms`), so a test can move time forward.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::error::{ApiError, Code};

/// Buckets kept before idle ones are dropped (a full bucket carries no information).
const MAX_BUCKETS: usize = 100_000;

/// One bucket per key: `capacity` events at once, refilled evenly over a minute.
pub struct Limiter {
    capacity: f64,
    per_sec: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    /// When the bucket was last filled up to date (Unix ms).
    at: i64,
}

impl Limiter {
    /// `n` events per minute per key, all of them usable at once. `0` turns the limit off.
    pub fn per_minute(n: u32) -> Self {
        Limiter { capacity: f64::from(n), per_sec: f64::from(n) / 60.0, buckets: Mutex::new(HashMap::new()) }
    }

    /// Refuses when `key`'s bucket is empty at `now` (Unix ms), without spending from it.
    pub fn check(&self, key: &str, now: i64) -> Result<(), ApiError> {
        self.spend(key, 0.0, now)
    }

    /// Spends one event from `key`'s bucket at `now` (Unix ms); refuses (spending nothing) when
    /// it is empty.
    pub fn take(&self, key: &str, now: i64) -> Result<(), ApiError> {
        self.spend(key, 1.0, now)
    }

    fn spend(&self, key: &str, cost: f64, now: i64) -> Result<(), ApiError> {
        if self.capacity <= 0.0 {
            return Ok(());
        }
        // A clock set back refills nothing rather than draining.
        let secs_since = |at: i64| (now - at).max(0) as f64 / 1000.0;
        let Ok(mut buckets) = self.buckets.lock() else { return Ok(()) };
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            let (capacity, per_sec) = (self.capacity, self.per_sec);
            buckets.retain(|_, b| b.tokens + secs_since(b.at) * per_sec < capacity);
        }
        let b = buckets.entry(key.to_string()).or_insert(Bucket { tokens: self.capacity, at: now });
        b.tokens = (b.tokens + secs_since(b.at) * self.per_sec).min(self.capacity);
        b.at = now;
        if b.tokens < 1.0 {
            let wait = ((1.0 - b.tokens) / self.per_sec).ceil().max(1.0) as u32;
            return Err(ApiError::new(Code::RATE_LIMITED).retry_after(wait));
        }
        b.tokens -= cost;
        Ok(())
    }
}

/// The limits of one process.
pub struct RateLimits {
    /// Failed attempts per account (an email at login, a user at MFA verify).
    pub account: Limiter,
    /// Calls per client address to any limited endpoint.
    pub address: Limiter,
    /// Sign-ups per client address.
    pub register: Limiter,
}

impl RateLimits {
    pub fn new(per_account: u32, per_address: u32, registrations: u32) -> Self {
        RateLimits {
            account: Limiter::per_minute(per_account),
            address: Limiter::per_minute(per_address),
            register: Limiter::per_minute(registrations),
        }
    }

    /// Spends one call of `client`'s allowance for the endpoint group `what` at `now` (Unix ms).
    pub fn address(&self, what: &str, client: Option<IpAddr>, now: i64) -> Result<(), ApiError> {
        match client {
            Some(ip) => self.address.take(&format!("{what}:{ip}"), now),
            None => Ok(()),
        }
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits::new(10, 60, 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_795_000_000_000;

    #[test]
    fn a_bucket_empties_and_tells_how_long_to_wait() {
        let l = Limiter::per_minute(3);
        for _ in 0..3 {
            l.check("k", T).unwrap();
            l.take("k", T).unwrap();
        }
        let e = l.take("k", T).unwrap_err();
        assert_eq!(e.code, Code::RATE_LIMITED);
        assert!(e.retry_after.is_some_and(|s| (1..=20).contains(&s)), "{:?}", e.retry_after);
        assert!(l.check("k", T).is_err());
        l.take("other", T).unwrap();
    }

    #[test]
    fn a_bucket_refills_as_the_clock_moves() {
        let l = Limiter::per_minute(3);
        for _ in 0..3 {
            l.take("k", T).unwrap();
        }
        assert!(l.take("k", T + 10_000).is_err(), "a sixth of a minute refills half a call");
        l.take("k", T + 20_500).unwrap();
        assert!(l.take("k", T + 20_500).is_err());
        for _ in 0..3 {
            l.take("k", T + 120_000).unwrap();
        }
        assert!(l.take("k", T + 120_000).is_err(), "a bucket holds its capacity at most");
        assert!(l.check("k", T).is_err(), "a clock set back refills nothing");
    }

    #[test]
    fn zero_means_unlimited() {
        let l = Limiter::per_minute(0);
        for _ in 0..1000 {
            l.take("k", T).unwrap();
        }
    }
}
