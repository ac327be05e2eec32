//! Seeded mutation of corpus inputs for the stable fuzz driver `pod-fuzz`:
//! bit flips, byte edits, chunk copies, splices between seeds, and tokens
//! the parsers care about. Much weaker than libFuzzer's coverage guidance,
//! but it runs on stable and in seconds.

use crate::rng::Rng;

// Tokens that move the parsers into their interesting states.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"data:",
    b"event: ",
    b": ",
    b"[DONE]",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b",",
    b":",
    b"null",
    b"true",
    b"0",
    b"-1",
    b"1e309",
    b"18446744073709551616",
    b"0.1",
    b"\"type\":",
    b"\"index\":",
    b"\"tool_calls\":",
    b"\"crc\":\"",
    b"\",\"rec\":",
    b"\xff",
    b"\xc3\xa9",
    b"\x00",
];

// Inputs are capped so one slow case cannot stall the run.
const MAX_LEN: usize = 64 * 1024;

/// Returns a mutation of `input` (with `others` available for splicing).
pub fn mutate(rng: &mut Rng, input: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut data = input.to_vec();
    for _ in 0..rng.range(1, 4) {
        apply(rng, &mut data, others);
    }
    data.truncate(MAX_LEN);
    data
}

fn apply(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = data.len() as u64;
    let at = rng.below(len + 1) as usize;
    match rng.below(8) {
        0 if !data.is_empty() => {
            let i = rng.below(len) as usize;
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = rng.below(len) as usize;
            data[i] = rng.below(256) as u8;
        }
        2 if !data.is_empty() => {
            let end = (at + rng.range(1, 16) as usize).min(data.len());
            data.drain(at.min(end)..end);
        }
        3 => {
            let token = TOKENS[rng.below(TOKENS.len() as u64) as usize];
            data.splice(at..at, token.iter().copied());
        }
        4 if !data.is_empty() => {
            // Duplicate a chunk somewhere else.
            let start = rng.below(len) as usize;
            let end = (start + rng.range(1, 64) as usize).min(data.len());
            let chunk = data[start..end].to_vec();
            let to = rng.below(data.len() as u64 + 1) as usize;
            data.splice(to..to, chunk);
        }
        5 if !others.is_empty() => {
            // Splice: our head, another seed's tail.
            let other = &others[rng.below(others.len() as u64) as usize];
            let from = rng.below(other.len() as u64 + 1) as usize;
            data.truncate(at);
            data.extend_from_slice(&other[from..]);
        }
        6 => data.truncate(at),
        _ => {
            // An ASCII digit changed: numbers, indices, lengths, CRC hex.
            if let Some(i) = data.iter().position(|b| b.is_ascii_digit()) {
                let skip = rng.below(len) as usize;
                let j = data[i..]
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.is_ascii_digit())
                    .map(|(k, _)| i + k)
                    .nth(skip % 8)
                    .unwrap_or(i);
                data[j] = b'0' + rng.below(10) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_bounded() {
        let seeds = vec![b"data: {\"a\":1}\n\n".to_vec(), b"{\"crc\":\"0\"}".to_vec()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..200)
                .map(|i| mutate(&mut rng, &seeds[i % 2], &seeds))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        assert!(run(3).iter().all(|m| m.len() <= MAX_LEN));
    }
}
