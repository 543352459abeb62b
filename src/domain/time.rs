//! Timestamps: stored as Unix milliseconds, shown as RFC 3339 UTC strings. What time it is
//! comes from the process's clock (`crate::clock`), never from here.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Unix milliseconds as RFC 3339 in UTC, always with three fraction digits (`…:00.120Z`, not
/// `…:00.12Z`), so every timestamp the API shows has one width and sorts as text. Empty for a
/// time outside the years 0 to 9999.
pub fn rfc3339(ms: i64) -> String {
    rfc3339_bytes(ms).as_str().to_owned()
}

/// [`rfc3339`] as the bytes written into a JSON answer, without a `String` between.
pub fn rfc3339_bytes(ms: i64) -> Utc {
    match OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms).saturating_mul(1_000_000)) {
        Ok(t) if (0..=9999).contains(&t.year()) => utc(t, 3),
        _ => Utc { bytes: [0; 30], len: 0 },
    }
}

/// An RFC 3339 time's ASCII bytes (`len` of them).
pub struct Utc {
    bytes: [u8; 30],
    len: usize,
}

impl Utc {
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    /// The time as text (its bytes are ASCII digits and separators).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

/// `t` (a year 0 to 9999) as RFC 3339 in UTC with `fraction` digits of the second (3:
/// milliseconds, 6: microseconds; at most 9), without a `String` of its own. Digits are placed
/// by hand: every view formats its times, a page of levels fifty of them, and `format!` with
/// padding took as long as the page's other JSON; the log writes one per request.
pub fn utc(t: OffsetDateTime, fraction: usize) -> Utc {
    let fraction = fraction.min(9);
    let mut out = [b'0'; 30];
    let mut put = |at: usize, width: usize, mut n: u32| {
        for i in (at..at.saturating_add(width)).rev() {
            if let Some(b) = out.get_mut(i) {
                *b = b'0'.saturating_add((n % 10) as u8);
            }
            n /= 10;
        }
    };
    put(0, 4, t.year().clamp(0, 9999) as u32);
    put(5, 2, u32::from(u8::from(t.month())));
    put(8, 2, u32::from(t.day()));
    put(11, 2, u32::from(t.hour()));
    put(14, 2, u32::from(t.minute()));
    put(17, 2, u32::from(t.second()));
    put(20, fraction, t.nanosecond().checked_div(10u32.saturating_pow(9u32.saturating_sub(fraction as u32))).unwrap_or(0));
    let end = 20usize.saturating_add(fraction);
    for (at, sep) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (end, b'Z')] {
        if let Some(b) = out.get_mut(at) {
            *b = sep;
        }
    }
    Utc { bytes: out, len: end.saturating_add(1) }
}

/// Parses an RFC 3339 timestamp into Unix milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    OffsetDateTime::parse(s, &Rfc3339).ok().map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// A record's time that is stored and shown: Unix milliseconds in the binary codec, RFC 3339 in
/// JSON (`#[serde(with = "crate::domain::time::stamp")]`), for records the API shows as they are
/// stored (orders).
pub mod stamp {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() { s.serialize_str(&super::rfc3339(*ms)) } else { s.serialize_i64(*ms) }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        if d.is_human_readable() {
            let text = String::deserialize(d)?;
            super::parse_rfc3339(&text).ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 timestamp"))
        } else {
            i64::deserialize(d)
        }
    }
}

/// [`stamp`] of an optional time.
pub mod stamp_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match ms {
            Some(ms) if s.is_human_readable() => s.serialize_some(&super::rfc3339(*ms)),
            Some(ms) => s.serialize_some(ms),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        if d.is_human_readable() {
            match Option::<String>::deserialize(d)? {
                Some(text) => super::parse_rfc3339(&text)
                    .map(Some)
                    .ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 timestamp")),
                None => Ok(None),
            }
        } else {
            Option::<i64>::deserialize(d)
        }
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Stamped {
        #[serde(with = "super::stamp")]
        at: i64,
        #[serde(with = "super::stamp_opt")]
        until: Option<i64>,
    }

    #[test]
    fn stamps_are_numbers_when_stored_and_text_when_shown() {
        let s = Stamped { at: 1_795_000_000_200, until: Some(1) };
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json, serde_json::json!({"at": "2026-11-18T11:06:40.200Z", "until": "1970-01-01T00:00:00.001Z"}));
        assert_eq!(serde_json::from_value::<Stamped>(json).unwrap(), s);
        let stored = crate::storage::codec::encode(&s).unwrap();
        assert_eq!(crate::storage::codec::decode::<Stamped>(&stored).unwrap(), s);
        // The stored form is the plain integers (the layout of records written before).
        let plain = crate::storage::codec::encode(&(1_795_000_000_200i64, Some(1i64))).unwrap();
        assert_eq!(stored, plain);
    }

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

    #[test]
    fn digits_placed_by_hand_match_formatting() {
        // From year 0 to 9999 in uneven steps, each field's widths and carries included.
        let (first, last) = (-62_167_219_200_000i64, 253_402_300_799_999i64);
        let mut ms = first;
        while ms <= last {
            let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap();
            let expected = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            );
            assert_eq!(super::rfc3339(ms), expected, "{ms}");
            ms += 7_919_993_117;
        }
        assert_eq!(super::rfc3339(last), "9999-12-31T23:59:59.999Z");
        assert_eq!(super::rfc3339(last + 1), "", "past year 9999");
    }
}
