//! Timestamps: stored as Unix milliseconds, shown as RFC 3339 UTC strings. What time it is
//! comes from the process's clock (`crate::clock`), never from here.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Unix milliseconds as RFC 3339 in UTC, always with three fraction digits (`…:00.120Z`, not
/// `…:00.12Z`), so every timestamp the API shows has one width and sorts as text.
pub fn rfc3339(ms: i64) -> String {
    let Ok(t) = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms).saturating_mul(1_000_000)) else { return String::new() };
    if !(0..=9999).contains(&t.year()) {
        return String::new();
    }
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
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

    #[test]
    fn always_three_fraction_digits() {
        assert_eq!(super::rfc3339(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
        assert_eq!(super::rfc3339(1_795_000_000_200), "2026-11-18T11:06:40.200Z");
        assert_eq!(super::rfc3339(1_795_000_000_020), "2026-11-18T11:06:40.020Z");
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }
}
