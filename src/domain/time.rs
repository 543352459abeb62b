//! Timestamps: stored as Unix milliseconds, shown as RFC 3339 UTC strings. What time it is
//! comes from the process's clock (`crate::clock`), never from here.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Unix milliseconds as RFC 3339, e.g. `2026-11-21T08:37:00.123Z`.
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Parses an RFC 3339 timestamp into Unix milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    OffsetDateTime::parse(s, &Rfc3339).ok().map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips() {
        let ms = 1_795_000_000_123;
        assert_eq!(super::parse_rfc3339(&super::rfc3339(ms)), Some(ms));
    }
}
