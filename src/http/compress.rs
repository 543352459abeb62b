//! Compressed answers: gzip or brotli, at fast levels, when the client accepts one and the body
//! is large enough to gain. Never on answers carrying a secret (tokens, keys, codes shown once):
//! compressing a secret beside text an attacker can inject lets them read it from the sizes
//! (BREACH). Answers that could be compressed carry `Vary: Accept-Encoding`, so a cache keeps
//! each coding apart.
//!
//! Most answers are compressed here, on their way out ([`apply`]). Answers the cell keeps
//! (`search::cache`) are compressed once with [`pack`] and kept so; a handler answers those
//! already compressed ([`mark_coded`]), and [`apply`] leaves them as they are.

use std::io::Write;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::HeaderMap;
use hyper::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, VARY};

use crate::http::Resp;

/// Below this many bytes an answer is sent as it is: the saving would not pay for the work
/// (a product is about 1 KB of JSON, a page of 20 about 18.7 KB).
pub const THRESHOLD: usize = 1024;

/// brotli's quality 0..11: on a 16 KB list page, 4 takes 84 µs for 1,421 bytes where 1 takes
/// 98 µs for 1,564 (its faster matcher). gzip ([`super::gzip`]) takes a fifth of that for about
/// 2,600 bytes: gzip is preferred when both are accepted alike, brotli kept for clients that ask
/// for it first.
const BROTLI_QUALITY: u32 = 4;
/// A 32 KiB window: answers are far smaller than the default 4 MiB one, which costs setup time.
const BROTLI_WINDOW: u32 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Brotli,
    Gzip,
}

impl Coding {
    fn name(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }
}

/// The coding to answer in, from `Accept-Encoding` (RFC 9110 §12.5.3): gzip when it is accepted
/// at least as much as brotli (a third of brotli's cost for a few percent more bytes), brotli
/// when the client prefers it, none otherwise. A coding with `q=0` is refused.
pub fn negotiate(accept: Option<&str>) -> Option<Coding> {
    let accept = accept?;
    let (mut br, mut gzip, mut any) = (None, None, None);
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match name.as_str() {
            "br" => br = Some(q),
            "gzip" | "x-gzip" => gzip = Some(q),
            "*" => any = Some(q),
            _ => {}
        }
    }
    let br = br.or(any).unwrap_or(0.0);
    let gzip = gzip.or(any).unwrap_or(0.0);
    if gzip > 0.0 && gzip >= br {
        Some(Coding::Gzip)
    } else if br > 0.0 {
        Some(Coding::Brotli)
    } else {
        None
    }
}

/// `bytes` in `coding`.
pub fn encode(bytes: &[u8], coding: Coding) -> std::io::Result<Vec<u8>> {
    match coding {
        Coding::Brotli => {
            let mut out = Vec::with_capacity(bytes.len() / 4);
            {
                let mut w = brotli::CompressorWriter::new(&mut out, 4096, BROTLI_QUALITY, BROTLI_WINDOW);
                w.write_all(bytes)?;
                w.flush()?;
            }
            Ok(out)
        }
        Coding::Gzip => Ok(super::gzip::encode(bytes)),
    }
}

/// `bytes` in `coding` when that pays: `None` below [`THRESHOLD`] or when the coding is no
/// smaller (the answer is then sent as it is).
pub fn pack(bytes: &[u8], coding: Coding) -> Option<Bytes> {
    if bytes.len() < THRESHOLD {
        return None;
    }
    encode(bytes, coding).ok().filter(|packed| packed.len() < bytes.len()).map(Bytes::from)
}

/// An answer's body as it is sent: compressed in `coding` when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub body: Bytes,
    pub coding: Option<Coding>,
}

impl Answer {
    /// `plain`, or what [`pack`] made of it in `coding`.
    pub fn of(plain: &Bytes, coding: Coding, packed: &Option<Bytes>) -> Answer {
        match packed {
            Some(p) => Answer { body: p.clone(), coding: Some(coding) },
            None => Answer { body: plain.clone(), coding: None },
        }
    }
}

/// Labels a body already in `coding`: what [`apply`] would have set compressing it.
pub fn mark_coded(headers: &mut HeaderMap, coding: Coding) {
    headers.append(VARY, HeaderValue::from_static("accept-encoding"));
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
    headers.remove(CONTENT_LENGTH);
}

fn compressible(resp: &Resp) -> bool {
    let Some(ct) = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    (ct.starts_with("application/json") || ct.starts_with("text/")) && !resp.headers().contains_key(CONTENT_ENCODING)
}

/// The answer compressed as `accept` allows, when it is worth it.
pub async fn apply(accept: Option<&HeaderValue>, mut resp: Resp) -> Resp {
    if !compressible(&resp) {
        return resp;
    }
    resp.headers_mut().append(VARY, HeaderValue::from_static("accept-encoding"));
    let Some(coding) = negotiate(accept.and_then(|v| v.to_str().ok())) else { return resp };
    let (mut parts, mut body) = resp.into_parts();
    // A whole body is one frame: taken as it is (collecting would allocate a list for it).
    let bytes = match body.frame().await {
        Some(Ok(frame)) => frame.into_data().unwrap_or_default(),
        Some(Err(never)) => match never {},
        None => Bytes::new(),
    };
    match pack(&bytes, coding) {
        Some(packed) => {
            parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
            parts.headers.remove(CONTENT_LENGTH);
            Resp::from_parts(parts, Full::new(packed))
        }
        None => Resp::from_parts(parts, Full::new(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coding_follows_accept_encoding() {
        assert_eq!(negotiate(None), None);
        assert_eq!(negotiate(Some("gzip, br")), Some(Coding::Gzip));
        assert_eq!(negotiate(Some("br, gzip;q=0.9")), Some(Coding::Brotli));
        assert_eq!(negotiate(Some("br")), Some(Coding::Brotli));
        assert_eq!(negotiate(Some("gzip")), Some(Coding::Gzip));
        assert_eq!(negotiate(Some("br;q=0, gzip")), Some(Coding::Gzip));
        assert_eq!(negotiate(Some("br;q=0")), None);
        assert_eq!(negotiate(Some("br;q=0.5, gzip;q=0.8")), Some(Coding::Gzip));
        assert_eq!(negotiate(Some("identity")), None);
        assert_eq!(negotiate(Some("*")), Some(Coding::Gzip));
        assert_eq!(negotiate(Some("*;q=0")), None);
        assert_eq!(negotiate(Some("deflate, GZIP;Q=1")), Some(Coding::Gzip));
    }

    #[test]
    fn both_codings_round_trip() {
        use std::io::Read;
        let text = serde_json::json!({"data": vec!["a product title, repeated"; 200]}).to_string();
        let br = encode(text.as_bytes(), Coding::Brotli).unwrap();
        let mut back = Vec::new();
        brotli::Decompressor::new(br.as_slice(), 4096).read_to_end(&mut back).unwrap();
        assert_eq!(back, text.as_bytes());
        let gz = encode(text.as_bytes(), Coding::Gzip).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut back).unwrap();
        assert_eq!(back, text.as_bytes());
        assert!(br.len() * 4 < text.len() && gz.len() * 4 < text.len());
    }

    #[test]
    fn gzip_round_trips_incompressible_and_empty_input() {
        use std::io::Read;
        // Bytes that barely compress: the output outgrows its first allocation.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for input in [&noise[..], b"{}", &[]] {
            for _ in 0..2 {
                let gz = encode(input, Coding::Gzip).unwrap();
                let mut back = Vec::new();
                flate2::read::GzDecoder::new(gz.as_slice()).read_to_end(&mut back).unwrap();
                assert_eq!(back, input);
            }
        }
    }
}
