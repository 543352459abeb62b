//! Small helpers shared across modules.

use ring::rand::{SecureRandom, SystemRandom};

/// Cryptographically secure random bytes.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    // The system generator only fails if the OS has no entropy source: nothing can run then.
    if SystemRandom::new().fill(&mut out).is_err() {
        panic!("the operating system's random generator is unavailable");
    }
    out
}

/// Compares secrets in constant time.
pub fn secret_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
