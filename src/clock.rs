//! The one clock of a process: every "what time is it" (record times, the time inside v7 ids,
//! token issue and expiry, sessions, rate-limit windows, scheduled publishing, gift-card expiry,
//! idempotency retention) reads it, so a test can move time forward instead of sleeping.
//!
//! Durations measured on the monotonic clock (timeouts, cache ages, elapsed times in logs) stay
//! on `Instant` and tokio's timer: they ask "how long", not "when".

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;
use uuid::timestamp::context::ContextV7;
use uuid::{Timestamp, Uuid};

/// The process's clock: the system time plus an offset that only [`Clock::advance`] moves.
/// Clones share the offset, so every part of a process handed one sees the same time.
#[derive(Clone)]
pub struct Clock(Arc<Inner>);

struct Inner {
    /// Milliseconds added to the system time.
    offset_ms: AtomicI64,
    /// Keeps the ids of one millisecond in creation order, as `Uuid::now_v7` does.
    ids: Mutex<ContextV7>,
    /// Woken on every advance, so a sleeper whose moment has come returns at once.
    moved: Notify,
}

impl Clock {
    /// The real time (no offset).
    pub fn system() -> Clock {
        Clock(Arc::new(Inner { offset_ms: AtomicI64::new(0), ids: Mutex::new(ContextV7::new()), moved: Notify::new() }))
    }

    /// Now, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        (self.now_nanos() / 1_000_000) as i64
    }

    /// Now, in whole Unix seconds (the `iat` and `exp` of tokens).
    pub fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// A new UUID v7 stamped with [`Clock::now_ms`]; ids made by one clock sort in the order
    /// they were made, within a millisecond too.
    pub fn new_id(&self) -> Uuid {
        let nanos = self.now_nanos().max(0);
        let (secs, subsec) = ((nanos / 1_000_000_000) as u64, (nanos % 1_000_000_000) as u32);
        Uuid::new_v7(Timestamp::from_unix(&self.0.ids, secs, subsec))
    }

    /// Moves this clock (and every clone of it) forward by `by`, and wakes every
    /// [`Clock::sleep_until`] so those now due return.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.offset_ms.fetch_add(ms, Ordering::SeqCst);
        self.0.moved.notify_waiters();
    }

    /// Returns once [`Clock::now_ms`] has reached `at_ms`: after the real time remaining, or
    /// at once when [`Clock::advance`] moves the clock past it.
    pub async fn sleep_until(&self, at_ms: i64) {
        loop {
            // Registered before the time is read, so an advance in between is not missed.
            let moved = self.0.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let now = self.now_ms();
            if now >= at_ms {
                return;
            }
            // The system time and tokio's monotonic timer may drift apart: the loop checks again.
            let remaining = Duration::from_millis((at_ms - now) as u64);
            tokio::select! {
                _ = tokio::time::sleep(remaining) => {}
                _ = moved => {}
            }
        }
    }

    fn now_nanos(&self) -> i128 {
        let system = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        system + i128::from(self.0.offset_ms.load(Ordering::SeqCst)) * 1_000_000
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock").field("offset_ms", &self.0.offset_ms.load(Ordering::SeqCst)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Unix milliseconds inside a v7 id.
    fn id_ms(id: Uuid) -> i64 {
        let (secs, nanos) = id.get_timestamp().expect("a v7 id has a time").to_unix();
        secs as i64 * 1000 + i64::from(nanos / 1_000_000)
    }

    #[test]
    fn advance_moves_now_and_every_clone() {
        let clock = Clock::system();
        let other = clock.clone();
        let before = clock.now_ms();
        clock.advance(Duration::from_secs(3600));
        let after = other.now_ms();
        assert!((3_600_000..3_660_000).contains(&(after - before)), "moved by {}", after - before);
        assert_eq!(other.now_secs(), after.div_euclid(1000));
    }

    #[test]
    fn ids_carry_the_clock_time_and_sort_in_creation_order() {
        let clock = Clock::system();
        let now = clock.now_ms();
        let id = clock.new_id();
        assert_eq!(id.get_version_num(), 7);
        assert!((now..now + 1000).contains(&id_ms(id)));

        clock.advance(Duration::from_secs(86_400));
        let later = clock.new_id();
        assert!(id_ms(later) >= now + 86_400_000, "the id follows the clock");
        assert!(later > id);

        // Thousands within the same few milliseconds still sort as they were made.
        let ids: Vec<Uuid> = (0..10_000).map(|_| clock.new_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids[0] > later);
    }

    #[tokio::test]
    async fn advance_wakes_a_sleeper_at_once() {
        let clock = Clock::system();
        let at = clock.now_ms() + 3_600_000;
        let c = clock.clone();
        let sleeper = tokio::spawn(async move {
            c.sleep_until(at).await;
            c.now_ms()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "an hour has not passed");

        // A move short of the moment wakes it, and it sleeps on.
        clock.advance(Duration::from_secs(1800));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "half an hour is not enough");

        clock.advance(Duration::from_secs(1800));
        let woke = tokio::time::timeout(Duration::from_secs(5), sleeper).await.expect("woken by the advance").unwrap();
        assert!(woke >= at);
    }

    #[tokio::test]
    async fn a_sleep_ends_by_itself_when_real_time_passes() {
        let clock = Clock::system();
        let at = clock.now_ms() + 30;
        tokio::time::timeout(Duration::from_secs(5), clock.sleep_until(at)).await.expect("returns after 30 ms");
        assert!(clock.now_ms() >= at);
        // A moment already past returns at once.
        tokio::time::timeout(Duration::from_millis(1), clock.sleep_until(at - 1_000)).await.expect("already due");
    }
}
