//! What the server under test reports (`/metrics`) and what it leaves on disk.

use std::path::Path;
use std::time::Duration;

use hyper::StatusCode;

use super::{BoxError, Client, Endpoint, describe_status};

/// One sample of the Prometheus text format: `name{label="value",…} value`.
#[derive(Clone, Debug)]
pub struct MetricSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl MetricSample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The samples of a Prometheus text exposition; comments and lines that do not parse are skipped,
/// since a benchmark only reads the families it knows.
pub fn parse_metrics(text: &str) -> Vec<MetricSample> {
    text.lines().filter(|line| !line.starts_with('#')).filter_map(parse_sample).collect()
}

fn parse_sample(line: &str) -> Option<MetricSample> {
    let line = line.trim();
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        let mut chars = inside.char_indices();
        let mut key = String::new();
        let close = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        };
        rest = &inside[close + 1..];
    }
    // A timestamp may follow the value; the value is the first field.
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(MetricSample { name, labels, value })
}

/// `GET /metrics` with the server's service key (`ServerProcess::service_key`), parsed.
pub async fn scrape_metrics(client: &mut Client, endpoint: &Endpoint, key: &str) -> Result<Vec<MetricSample>, BoxError> {
    let mut request = endpoint.get("/metrics");
    request.headers_mut().insert("x-shopcell-service", hyper::header::HeaderValue::from_str(key)?);
    let (status, body) = client.send(request).await?;
    if status != StatusCode::OK {
        return Err(format!("/metrics: {}", describe_status(status, &body)).into());
    }
    Ok(parse_metrics(&String::from_utf8_lossy(&body)))
}

/// The sum of every sample of `family` (all label sets), or `None` when the family is absent.
pub fn metric_sum(samples: &[MetricSample], family: &str) -> Option<f64> {
    samples.iter().filter(|s| s.name == family).map(|s| s.value).reduce(|a, b| a + b)
}

/// Bytes a file or directory tree occupies on disk: allocated blocks, not lengths, so files the
/// database grows ahead of its data or leaves sparse count as the disk holds them. Symbolic
/// links are not followed.
pub fn disk_usage(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            total += disk_usage(&entry?.path())?;
        }
    }
    Ok(total)
}

/// A rate rounded to a whole number with thousands separators, for reading at a glance.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A duration in milliseconds with two decimals.
pub fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}
