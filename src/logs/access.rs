//! The access line, one per request, written by hand in the log's format: it is the busiest
//! line of the log, and through the logger's general formatter (a visitor per field, a
//! formatted timestamp, the client address as a string) it cost the cheapest read about a
//! fifth of its time. Same fields, names and order as the logger writes its other lines, so a
//! log reads as one; silenced like any other target (`SHOPCELL_LOG=info,access=off`).

use std::fmt::Write as _;
use std::net::IpAddr;

use super::{ACCESS, LogFormat};

/// One request, as its access line tells it: never a query string, header or body.
pub struct Access<'a> {
    pub method: &'a str,
    /// The route's pattern, never the raw path.
    pub route: &'a str,
    pub status: u16,
    pub duration_us: u64,
    pub bytes: u64,
    pub request_id: &'a str,
    pub client: Option<IpAddr>,
}

/// Writes `a`'s line, unless the log is not set up (a test's server in process) or the access
/// target is silenced.
pub fn write(a: &Access) {
    let (Some(out), Some(format)) = (super::WRITER.get(), super::FORMAT.get()) else { return };
    if !tracing::enabled!(target: ACCESS, tracing::Level::INFO) {
        return;
    }
    let mut line = String::with_capacity(256);
    let form = match format {
        LogFormat::Json => &JSON,
        LogFormat::Text => &TEXT,
    };
    let _ = written(&mut line, a, form);
    out.push(line.as_bytes());
}

/// What a format writes around the values of a line: its keys and punctuation, and whether the
/// method is quoted (JSON) or bare (text, as the logger writes a plain string).
struct Form {
    start: &'static str,
    method: &'static str,
    quote_method: bool,
    route: &'static str,
    status: &'static str,
    duration: &'static str,
    bytes: &'static str,
    request_id: &'static str,
    client: &'static str,
    end: &'static str,
}

const JSON: Form = Form {
    start: "{\"timestamp\":\"",
    method: "\",\"level\":\"INFO\",\"message\":\"request\",\"method\":",
    quote_method: true,
    route: ",\"route\":",
    status: ",\"status\":",
    duration: ",\"duration_ms\":",
    bytes: ",\"bytes\":",
    request_id: ",\"request_id\":",
    client: ",\"client\":\"",
    end: "\",\"target\":\"access\"}\n",
};

const TEXT: Form = Form {
    start: "",
    method: "  INFO access: request method=",
    quote_method: false,
    route: " route=",
    status: " status=",
    duration: " duration_ms=",
    bytes: " bytes=",
    request_id: " request_id=",
    client: " client=",
    end: "\n",
};

fn written(line: &mut String, a: &Access, form: &Form) -> std::fmt::Result {
    line.push_str(form.start);
    timestamp(line);
    line.push_str(form.method);
    if form.quote_method {
        quoted(line, a.method);
    } else {
        line.push_str(a.method);
    }
    line.push_str(form.route);
    quoted(line, a.route);
    line.push_str(form.status);
    int(line, a.status);
    line.push_str(form.duration);
    millis(line, a.duration_us);
    line.push_str(form.bytes);
    int(line, a.bytes);
    line.push_str(form.request_id);
    quoted(line, a.request_id);
    line.push_str(form.client);
    client(line, a.client)?;
    line.push_str(form.end);
    Ok(())
}

/// Now in UTC with microseconds, as the logger writes its other lines' times.
fn timestamp(line: &mut String) {
    line.push_str(crate::domain::time::utc(time::OffsetDateTime::now_utc(), 6).as_str());
}

/// Integers without the formatter's machinery (a line has four).
fn int(line: &mut String, n: impl itoa::Integer) {
    line.push_str(itoa::Buffer::new().format(n));
}

/// Microseconds as milliseconds with three decimals (`0.388`).
fn millis(line: &mut String, us: u64) {
    int(line, us / 1000);
    let fraction = us % 1000;
    line.push_str(if fraction < 10 {
        ".00"
    } else if fraction < 100 {
        ".0"
    } else {
        "."
    });
    int(line, fraction);
}

fn client(line: &mut String, client: Option<IpAddr>) -> std::fmt::Result {
    match client {
        // The usual address, by its four numbers.
        Some(IpAddr::V4(ip)) => {
            for (i, octet) in ip.octets().into_iter().enumerate() {
                if i > 0 {
                    line.push('.');
                }
                int(line, octet);
            }
            Ok(())
        }
        Some(ip) => write!(line, "{ip}"),
        None => {
            line.push('-');
            Ok(())
        }
    }
}

/// `s` as a JSON string (also how the text form quotes a value): `"` and `\` escaped, control
/// characters as `\u00XX`. A request id is the client's own text.
fn quoted(line: &mut String, s: &str) {
    line.push('"');
    // Route patterns and generated ids have nothing to escape.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        line.push_str(s);
        line.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => line.push_str("\\\""),
            '\\' => line.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(line, "\\u{:04x}", u32::from(c));
            }
            c => line.push(c),
        }
    }
    line.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &'static str) -> Access<'static> {
        Access {
            method: "GET",
            route: "/api/v1/stores/{storeId}/products",
            status: 200,
            duration_us: 1_388,
            bytes: 15,
            request_id: id,
            client: Some("203.0.113.9".parse().unwrap()),
        }
    }

    #[test]
    fn the_json_line_has_the_fields_of_every_other_line_and_escapes_the_callers_text() {
        let mut line = String::new();
        written(&mut line, &request("a\"b\\c\u{1}"), &JSON).unwrap();
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "request");
        assert_eq!(v["target"], "access");
        assert_eq!(v["method"], "GET");
        assert_eq!(v["route"], "/api/v1/stores/{storeId}/products");
        assert_eq!(v["status"], 200);
        assert_eq!(v["duration_ms"], 1.388);
        assert_eq!(v["bytes"], 15);
        assert_eq!(v["request_id"], "a\"b\\c\u{1}");
        assert_eq!(v["client"], "203.0.113.9");
        let at = v["timestamp"].as_str().unwrap();
        assert_eq!((at.len(), &at[10..11], &at[19..20], &at[26..]), (27, "T", ".", "Z"), "{at}");
    }

    #[test]
    fn the_text_line_reads_as_the_loggers_own() {
        let mut line = String::new();
        let mut unknown = request("req-1");
        unknown.client = None;
        written(&mut line, &unknown, &TEXT).unwrap();
        let (_, rest) = line.split_once("  ").unwrap();
        assert_eq!(
            rest,
            "INFO access: request method=GET route=\"/api/v1/stores/{storeId}/products\" status=200 duration_ms=1.388 \
             bytes=15 request_id=\"req-1\" client=-\n"
        );
    }

    #[test]
    fn numbers_and_addresses_are_written_as_the_formatter_writes_them() {
        for us in [0, 7, 50, 388, 1_000, 1_388, 12_045, u64::MAX] {
            let mut line = String::new();
            millis(&mut line, us);
            assert_eq!(line, format!("{}.{:03}", us / 1000, us % 1000));
        }
        for ip in ["0.0.0.0", "203.0.113.9", "255.255.255.255", "::1", "2001:db8::8a2e:370:7334", "::ffff:10.0.0.1"] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut line = String::new();
            client(&mut line, Some(ip)).unwrap();
            assert_eq!(line, ip.to_string());
        }
    }
}
