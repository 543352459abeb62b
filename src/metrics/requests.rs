//! Requests: how long each took, by route pattern and status class, and how many are under way.
//!
//! One histogram per route row and class, allocated when the process starts and found by the
//! row's position: recording a request is a few relaxed atomic adds.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::http::route::Route;
use crate::metrics::{Exposition, Histogram, Source};

/// The status classes requests are counted under. `unavailable` is every 503: the service
/// refusing on purpose for now (the deprecated discount export, a store during a move, a
/// process shutting down), which is not a server error: `5xx` counts the answers that are
/// (500, 502, 504). A connection refused past a cap is no request: `OpenConnections` counts it.
pub const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "unavailable"];

/// The index in [`CLASSES`] of `status`.
pub fn class_of(status: u16) -> usize {
    if status == 503 { 5 } else { (status / 100).clamp(1, 5) as usize - 1 }
}

/// The label of a request that matched no route row (its raw path is never a label).
pub const UNMATCHED: &str = "unmatched";

type ByClass = [Histogram; CLASSES.len()];

pub struct RequestMetrics {
    /// Method and pattern of each route row, in the table's order.
    routes: Vec<(String, String)>,
    /// One set per route row, then one for requests that matched none.
    durations: Vec<ByClass>,
    in_flight: AtomicI64,
}

/// A request under way; it counts until dropped (a handler cancelled midway included).
pub struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RequestMetrics {
    pub fn new<C>(routes: &[Route<C>]) -> RequestMetrics {
        let by_class = || std::array::from_fn(|_| Histogram::seconds());
        RequestMetrics {
            routes: routes.iter().map(|r| (r.method.to_string(), r.path.clone())).collect(),
            durations: (0..=routes.len()).map(|_| by_class()).collect(),
            in_flight: AtomicI64::new(0),
        }
    }

    pub fn start(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// One answered request: the row it matched (its index in the table), its status and how
    /// long it took in microseconds.
    pub fn record(&self, route: Option<usize>, status: u16, micros: u64) {
        let row = route.filter(|i| *i < self.routes.len()).unwrap_or(self.routes.len());
        self.durations[row][class_of(status)].observe(micros);
    }
}

impl Source for RequestMetrics {
    fn collect(&self, out: &mut Exposition) {
        const NAME: &str = "shopcell_http_request_duration_seconds";
        const HELP: &str = "Time to answer a request (to the response head), by route pattern and status class.";
        out.declare(NAME, super::Kind::Histogram, HELP);
        for (row, by_class) in self.durations.iter().enumerate() {
            let (method, route) = match self.routes.get(row) {
                Some((m, p)) => (m.as_str(), p.as_str()),
                None => ("other", UNMATCHED),
            };
            // Rows never asked for are left out: hundreds of empty series would bury the rest.
            for (class, h) in CLASSES.iter().zip(by_class).filter(|(_, h)| h.count() > 0) {
                out.histogram(NAME, HELP, &[("method", method), ("route", route), ("class", class)], h);
            }
        }
        out.gauge(
            "shopcell_http_requests_in_flight",
            "Requests received and not yet answered.",
            &[],
            self.in_flight.load(Ordering::Relaxed),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_503_is_unavailable_and_other_5xx_are_server_errors() {
        assert_eq!(CLASSES[class_of(503)], "unavailable");
        assert_eq!(CLASSES[class_of(500)], "5xx");
        assert_eq!(CLASSES[class_of(502)], "5xx");
        assert_eq!(CLASSES[class_of(404)], "4xx");
        assert_eq!(CLASSES[class_of(204)], "2xx");
        assert_eq!(CLASSES[class_of(101)], "1xx");
    }
}
