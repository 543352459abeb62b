//! The process's one metrics registry, served at `/metrics` in Prometheus' text format.
//!
//! Every area registers a [`Source`] that writes its families when scraped; figures kept where
//! they happen (cache meters, job runner counts, open connections) are read then, not copied on
//! every change. What must be timed on a hot path uses a [`Histogram`] here: atomics allocated
//! once, with no lock and no label lookup per event.
//!
//! Hand-rolled rather than the `prometheus-client` crate: most families are read from counters
//! the areas already keep, which a registry of owned metric objects would have to mirror, and
//! the per-request histogram is indexed by the route row's position instead of hashed labels.
//! The text format is small and fixed; [`Exposition`] writes it, grouping each family's samples
//! under one `HELP`/`TYPE` whichever sources add to it.
//!
//! Labels are bounded by construction: route patterns from the route table, cell names from the
//! flags, outcomes from fixed lists. Never an id, a raw path or anything a client chooses.

pub mod listener;
pub mod process;
pub mod requests;
pub mod sources;

use std::fmt::{Display, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What an area adds to `/metrics`: it writes its families into the exposition when scraped.
pub trait Source: Send + Sync {
    fn collect(&self, out: &mut Exposition);
}

/// The registry: every source of the process, in the order registered.
#[derive(Default)]
pub struct Registry {
    sources: RwLock<Vec<Arc<dyn Source>>>,
}

impl Registry {
    /// Adds a source; it is read on every scrape from now on.
    pub fn register(&self, source: Arc<dyn Source>) {
        if let Ok(mut s) = self.sources.write() {
            s.push(source);
        }
    }

    /// The text of every family of every source.
    pub fn render(&self) -> String {
        let sources: Vec<Arc<dyn Source>> = self.sources.read().map(|s| s.clone()).unwrap_or_default();
        let mut out = Exposition::default();
        for s in sources {
            s.collect(&mut out);
        }
        out.finish()
    }
}

/// Upper bounds of request and commit durations, in microseconds (exposed in seconds).
pub const DURATION_BOUNDS_US: &[u64] =
    &[500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000];
/// Upper bounds of batch sizes (jobs per transaction).
pub const BATCH_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256];

/// A histogram of whole-number observations (microseconds, counts) with fixed bounds; `scale`
/// divides them for the exposition (1e6 turns microseconds into Prometheus' seconds).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    scale: f64,
    /// Observations per bucket, not cumulative; one more than the bounds (the `+Inf` bucket).
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64], scale: f64) -> Histogram {
        Histogram {
            bounds,
            scale,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    /// Durations, observed in microseconds and exposed in seconds.
    pub fn seconds() -> Histogram {
        Histogram::new(DURATION_BOUNDS_US, 1e6)
    }

    /// Sizes (jobs in a batch).
    pub fn sizes() -> Histogram {
        Histogram::new(BATCH_BOUNDS, 1.0)
    }

    pub fn observe(&self, value: u64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// The kind of a family, as `# TYPE` names it.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    name: String,
    help: &'static str,
    kind: Kind,
    samples: String,
}

/// The text format being written: families in the order first named, each with its samples
/// together (the format requires it) whichever source wrote them.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
}

pub type Labels<'a> = &'a [(&'a str, &'a str)];

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &'static str) -> &mut String {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family { name: name.to_string(), help, kind, samples: String::new() });
                self.families.len() - 1
            }
        };
        &mut self.families[i].samples
    }

    pub fn counter(&mut self, name: &str, help: &'static str, labels: Labels, value: u64) {
        let out = self.family(name, Kind::Counter, help);
        sample(out, name, "", labels, None, value);
    }

    pub fn gauge(&mut self, name: &str, help: &'static str, labels: Labels, value: impl Display) {
        let out = self.family(name, Kind::Gauge, help);
        sample(out, name, "", labels, None, value);
    }

    /// The family's `HELP`/`TYPE` with no sample yet (a family that exists before it counts).
    pub fn declare(&mut self, name: &str, kind: Kind, help: &'static str) {
        self.family(name, kind, help);
    }

    pub fn histogram(&mut self, name: &str, help: &'static str, labels: Labels, h: &Histogram) {
        let out = self.family(name, Kind::Histogram, help);
        let mut cumulative = 0;
        for (i, bucket) in h.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = match h.bounds.get(i) {
                Some(b) => (*b as f64 / h.scale).to_string(),
                None => "+Inf".to_string(),
            };
            sample(out, name, "_bucket", labels, Some(&le), cumulative);
        }
        // The count is read after the buckets: a scrape during an observation never shows a
        // count below the `+Inf` bucket by more than the observations in between.
        sample(out, name, "_sum", labels, None, h.sum.load(Ordering::Relaxed) as f64 / h.scale);
        sample(out, name, "_count", labels, None, cumulative.max(h.count()));
    }

    pub fn finish(self) -> String {
        let mut out = String::new();
        for f in self.families {
            let _ = write!(out, "# HELP {} {}\n# TYPE {} {}\n{}", f.name, f.help, f.name, f.kind.as_str(), f.samples);
        }
        out
    }
}

fn sample(out: &mut String, name: &str, suffix: &str, labels: Labels, le: Option<&str>, value: impl Display) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"");
            escape(out, v);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format wants it: backslash, quote and newline escaped.
fn escape(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_scaled() {
        let h = Histogram::seconds();
        for us in [300, 700, 2_000, 20_000_000] {
            h.observe(us);
        }
        let mut out = Exposition::default();
        out.histogram("d_seconds", "Durations.", &[("route", "/a/{id}")], &h);
        let text = out.finish();
        assert!(text.starts_with("# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{route=\"/a/{id}\",le=\"0.0005\"} 1\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{route=\"/a/{id}\",le=\"0.001\"} 2\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{route=\"/a/{id}\",le=\"10\"} 3\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{route=\"/a/{id}\",le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("d_seconds_sum{route=\"/a/{id}\"} 20.003\n"), "{text}");
        assert!(text.contains("d_seconds_count{route=\"/a/{id}\"} 4\n"), "{text}");
    }

    #[test]
    fn a_family_written_by_two_sources_is_one_block_with_escaped_labels() {
        let mut out = Exposition::default();
        out.counter("c_total", "C.", &[("owner", "a")], 1);
        out.gauge("g", "G.", &[], 2.5);
        out.counter("c_total", "C.", &[("owner", "b\"\\\n")], 3);
        let text = out.finish();
        assert_eq!(
            text,
            "# HELP c_total C.\n# TYPE c_total counter\nc_total{owner=\"a\"} 1\nc_total{owner=\"b\\\"\\\\\\n\"} 3\n\
             # HELP g G.\n# TYPE g gauge\ng 2.5\n"
        );
    }
}
