//! What tokens cost: a profile's [`Prices`] and amounts of money
//! ([`Cost`]), exact to a millionth so that sums and limits compare
//! without floating-point drift.

use crate::item::Usage;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Prices in a currency of the user's choice per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Fresh input.
    #[serde(default)]
    pub input: f64,
    /// Input written to the cache (Anthropic: 1.25× input for 5m, 2× for 1h).
    #[serde(default)]
    pub cache_write: f64,
    /// Input read from the cache (typically a tenth of input).
    #[serde(default)]
    pub cache_read: f64,
    /// Output, reasoning included.
    #[serde(default)]
    pub output: f64,
}

impl Prices {
    /// What `usage` costs at these prices.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per_token = |price: f64, tokens: u64| price * tokens as f64 / 1_000_000.0;
        per_token(self.input, usage.fresh_input())
            + per_token(self.cache_write, usage.cache_write_tokens)
            + per_token(self.cache_read, usage.cache_read_tokens)
            + per_token(self.output, usage.completion_tokens)
    }

    /// What `usage` costs, as a [`Cost`].
    pub fn charge(&self, usage: &Usage) -> Cost {
        Cost::from_amount(self.cost(usage))
    }
}

/// An amount of money in the currency of the prices, in millionths. It
/// reads and writes as a plain number (`2.5`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u64);

impl Cost {
    /// `amount` (negative and non-finite amounts are zero), rounded to a
    /// millionth.
    pub fn from_amount(amount: f64) -> Self {
        match amount.is_finite() && amount > 0.0 {
            true => Self((amount * 1_000_000.0).round().min(u64::MAX as f64) as u64),
            false => Self(0),
        }
    }

    /// The amount.
    pub fn amount(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    /// Millionths.
    pub fn micros(self) -> u64 {
        self.0
    }

    /// From millionths.
    pub fn from_micros(micros: u64) -> Self {
        Self(micros)
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, other: Cost) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Cost {
    fn sum<I: Iterator<Item = Cost>>(iter: I) -> Cost {
        iter.fold(Cost::default(), |a, b| a + b)
    }
}

/// Two decimals, or four below a hundredth (a few cents of tokens show).
impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str("0.00"),
            micros if micros < 10_000 => write!(f, "{:.4}", self.amount()),
            _ => write!(f, "{:.2}", self.amount()),
        }
    }
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.amount())
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let amount = f64::deserialize(deserializer)?;
        if !amount.is_finite() || amount < 0.0 {
            return Err(serde::de::Error::custom(format!(
                "{amount} is not an amount of money"
            )));
        }
        Ok(Cost::from_amount(amount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_priced_per_million_tokens_by_kind() {
        let prices = Prices {
            input: 3.0,
            cache_write: 6.0,
            cache_read: 0.3,
            output: 15.0,
        };
        let usage = Usage {
            prompt_tokens: 1_000_000,
            cache_read_tokens: 500_000,
            cache_write_tokens: 100_000,
            completion_tokens: 10_000,
            ..Default::default()
        };
        // 400k fresh × 3 + 100k × 6 + 500k × 0.3 + 10k × 15, per million.
        assert_eq!(
            prices.charge(&usage),
            Cost::from_amount(1.2 + 0.6 + 0.15 + 0.15)
        );
    }

    #[test]
    fn amounts_sum_exactly_and_read_as_numbers() {
        let tenth = Cost::from_amount(0.1);
        let total: Cost = std::iter::repeat_n(tenth, 10).sum();
        assert_eq!(total, Cost::from_amount(1.0));
        assert_eq!(total.to_string(), "1.00");
        assert_eq!(Cost::from_amount(0.0042).to_string(), "0.0042");
        assert_eq!(
            serde_json::to_string(&Cost::from_amount(2.5)).unwrap(),
            "2.5"
        );
        assert_eq!(
            serde_json::from_str::<Cost>("2.5").unwrap(),
            Cost::from_amount(2.5)
        );
        assert!(serde_json::from_str::<Cost>("-1").is_err());
        assert_eq!(Cost::from_amount(f64::NAN), Cost::default());
    }
}
